/* unicode.h: UTF-8 decoding, and the three character classes GPT-2's pre-tokenizer needs.
 *
 * The project's one UTF-8 decoder (the tokenizer's pre-tokenizer, the generation loop's
 * output, the attention map's labels), strict as Unicode's Table 3-7 asks. Membership tests
 * for letters, numbers and whitespace, answered from range tables that tools/gen_unicode.py
 * generates into unicode.c (Unicode 14.0.0).
 */
#ifndef UNICODE_H
#define UNICODE_H

#include <stddef.h>   /* size_t */
#include <stdint.h>   /* uint32_t */

#define UNICODE_MAX 0x10FFFFu              /* the largest code point */
#define UNICODE_SURROGATE_FIRST 0xD800u    /* U+D800..U+DFFF are UTF-16's surrogates, */
#define UNICODE_SURROGATE_LAST 0xDFFFu     /* never characters */
#define UNICODE_INVALID 0xFFFFFFFFu        /* unicode_utf8_next: a byte of no character */

/* The length of the UTF-8 sequence whose first byte is lead: 1 (ASCII), 2, 3 or 4; or 0
 * if lead starts none (a continuation byte 10xxxxxx, 0xC0, 0xC1, 0xF5..0xFF). Only lead
 * is read, so the sequence may still turn out malformed (unicode_utf8_next checks it). */
int unicode_utf8_length(unsigned char lead);

/* Decode the UTF-8 character at s[0 .. n) (n >= 1): its code point into *cp, and its
 * length in bytes (1..4) returned. A byte that starts no well-formed sequence (Unicode
 * Table 3-7: a bad lead or continuation byte, an overlong form, a surrogate, a value
 * above U+10FFFF, or a sequence cut off at n) is one byte long and decodes as
 * UNICODE_INVALID, so a walk over any bytes visits every byte, and they round-trip. */
size_t unicode_utf8_next(const unsigned char *s, size_t n, uint32_t *cp);

/* 1 if cp is a letter, \p{L} (general category Lu, Ll, Lt, Lm or Lo), else 0.
 * Any uint32_t is accepted; values above U+10FFFF are simply not letters. */
int unicode_is_letter(uint32_t cp);

/* 1 if cp is a number, \p{N} (general category Nd, Nl or No), else 0. Any uint32_t. */
int unicode_is_number(uint32_t cp);

/* 1 if cp is whitespace as JavaScript's \s defines it (ECMAScript WhiteSpace and
 * LineTerminator: U+0009..000D, U+0020, U+00A0, U+1680, U+2000..200A, U+2028, U+2029,
 * U+202F, U+205F, U+3000, U+FEFF), else 0. Not U+0085, not U+001C..001F. Any uint32_t. */
int unicode_is_space(uint32_t cp);

#endif /* UNICODE_H */
