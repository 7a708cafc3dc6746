unsigned long count_bytes(const char *text);
unsigned long count_words(const char *text);
