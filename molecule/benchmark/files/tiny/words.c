#include <ctype.h>
#include "tiny.h"

unsigned long count_words(const char *text)
{
    unsigned long n = 0;
    int in_word = 0;
    for (; *text; text++) {
        if (isspace((unsigned char)*text))
            in_word = 0;
        else if (!in_word) {
            in_word = 1;
            n++;
        }
    }
    return n;
}
