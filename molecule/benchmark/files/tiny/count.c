#include "tiny.h"

unsigned long count_bytes(const char *text)
{
    unsigned long n = 0;
    while (text[n])
        n++;
    return n;
}
