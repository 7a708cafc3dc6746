#include <stdio.h>
#include "tiny.h"

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        printf("%s: %lu bytes, %lu words\n", argv[i], count_bytes(argv[i]), count_words(argv[i]));
    return 0;
}
