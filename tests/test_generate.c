/* test_generate.c: the context shift and growth are exact. After a shift, the sequence
 * holds the kept tokens, run again from position 0; the logits and every greedy token after
 * it must be the bits a fresh run of just those tokens gives. Checked on the shipped GPT-2 model
 * (exact attention and a window variant) and on llama2.c's s260k (BOS kept). Greedy
 * tokens are chosen by this test's own argmax, not the sampler. The count of prompt
 * tokens a shift leaves (what --attn-map marks as prompt) is checked too. A state that
 * grows (run -I on a long context) gives a fresh run's bits likewise.
 */
#include <stdio.h>     /* snprintf */
#include <stdlib.h>    /* malloc, free */
#include <string.h>    /* memcmp, memcpy */
#include <sys/resource.h>   /* setrlimit, RLIMIT_AS */
#include <unistd.h>    /* sysconf, dup, dup2, close */

#include "attention.h"     /* AttentionConfig */
#include "generate.h"      /* Generation, generation_init, generation_append */
#include "model.h"         /* Model, model_load */
#include "os.h"            /* OS_PLAIN_ALLOC: under AddressSanitizer, or given */
#include "sampler.h"       /* Sampler: greedy, for generate */
#include "tokenizer.h"     /* Tokenizer, tokenizer_load */
#include "tests/check.h"   /* check_true, check_summary, check_data_file */

#define SHIPPED_MODEL "weights/model.bin"
#define SHIPPED_TOKENIZER "weights/tokenizer.bin"
#define AFTER_SHIFT 40     /* greedy tokens compared after the first shift */

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[best]) best = i;
    return best;
}

/* Generates greedily until the first shift, then AFTER_SHIFT more tokens; runs the kept
 * tokens fresh and generates as many; both must agree bit for bit. */
static void check_shift_exact(const char *what, Model *m, int n_ctx, int keep,
                              const int *prompt, int n_prompt) {
    int V = m->config.vocab_size;
    Generation g, fresh;
    memset(&fresh, 0, sizeof fresh);
    int *kept = malloc((size_t)n_ctx * sizeof(int));
    float *logits = malloc((size_t)V * sizeof(float));
    int shifted[AFTER_SHIFT], again[AFTER_SHIFT], n_kept = 0, ok = 1;
    if (!kept || !logits || generation_init(&g, m, n_ctx, n_ctx, keep, 1) != 0 ||
        generation_append(&g, prompt, n_prompt, 1) != 0) {
        check_true(0, "%s: set up", what);
        goto done;
    }
    /* until the first shift: at most n_ctx appends */
    for (int i = 0; i <= n_ctx && g.stats.shifts == 0 && ok; i++) {
        int next = argmax(g.logits, V);
        ok = generation_append(&g, &next, 1, 0) == 0;
    }
    check_true(ok && g.stats.shifts == 1 && g.n_tokens == keep + (n_ctx - keep) -
               (n_ctx - keep) / 2 + 1, "%s: one shift keeps %d + the latest half of %d, plus "
               "the new token (got %d tokens)", what, keep, n_ctx - keep, g.n_tokens);
    n_kept = g.n_tokens;
    memcpy(kept, g.tokens, (size_t)n_kept * sizeof(int));
    memcpy(logits, g.logits, (size_t)V * sizeof(float));
    for (int i = 0; i < AFTER_SHIFT && ok; i++) {
        shifted[i] = argmax(g.logits, V);
        ok = generation_append(&g, &shifted[i], 1, 0) == 0;
    }
    long shifts = g.stats.shifts;
    generation_free(&g);
    /* fresh: the kept tokens as a prompt */
    if (!ok || generation_init(&fresh, m, n_ctx, n_ctx, keep, 1) != 0 ||
        generation_append(&fresh, kept, n_kept, 1) != 0) {
        check_true(0, "%s: the fresh run", what);
        goto done;
    }
    check_true(memcmp(fresh.logits, logits, (size_t)V * sizeof(float)) == 0,
               "%s: logits after the shift == a fresh run of the %d kept tokens, bitwise",
               what, n_kept);
    for (int i = 0; i < AFTER_SHIFT && ok; i++) {
        again[i] = argmax(fresh.logits, V);
        ok = generation_append(&fresh, &again[i], 1, 0) == 0;
    }
    check_true(ok && memcmp(shifted, again, sizeof shifted) == 0 && fresh.stats.shifts ==
               shifts - 1, "%s: the %d greedy tokens after the shift == the fresh run's "
               "(%ld more shifts in both)", what, AFTER_SHIFT, shifts - 1);
done:
    generation_free(&fresh);
    free(kept);
    free(logits);
}

/* A state that starts at `first` positions and doubles (run -I): after its first growth
 * the logits are the bits a fresh run of the same tokens in a whole context gives, the
 * greedy tokens go on as that run's, and it reaches n_ctx in log2(n_ctx / first) growths,
 * then shifts as before. */
static void check_grow_exact(Model *m, int n_ctx, int first, const int *prompt,
                             int n_prompt) {
    int V = m->config.vocab_size, n_after = n_ctx + 8;   /* past every growth and a shift */
    Generation g, fresh;
    memset(&fresh, 0, sizeof fresh);
    int *grown = malloc((size_t)n_ctx * sizeof(int)), *ours = malloc(n_after * sizeof(int));
    int *theirs = malloc(n_after * sizeof(int)), n_grown = 0, ok = 1;
    if (!grown || !ours || !theirs || generation_init(&g, m, n_ctx, first, 0, 1) != 0 ||
        generation_append(&g, prompt, n_prompt, 1) != 0) {
        check_true(0, "growth: set up");
        goto done;
    }
    for (int i = 0; i <= first && g.stats.grows == 0 && ok; i++) {
        int next = argmax(g.logits, V);
        ok = generation_append(&g, &next, 1, 0) == 0;
    }
    n_grown = g.n_tokens;
    memcpy(grown, g.tokens, (size_t)n_grown * sizeof(int));
    check_true(ok && g.stats.grows == 1 && g.n_alloc == 2 * first && n_grown == first + 1 &&
               g.stats.grow_tokens == first && g.stats.shifts == 0, "growth: the %dth token "
               "doubles %d positions, the %d before it run again (got %d positions, %ld tokens)",
               first + 1, first, first, g.n_alloc, g.stats.grow_tokens);
    ok = ok && generation_init(&fresh, m, n_ctx, n_ctx, 0, 1) == 0 &&
         generation_append(&fresh, grown, n_grown, 1) == 0;
    check_true(ok && memcmp(fresh.logits, g.logits, (size_t)V * sizeof(float)) == 0,
               "growth: logits after it == a fresh run of its %d tokens in %d positions, "
               "bitwise", n_grown, n_ctx);
    for (int i = 0; i < n_after && ok; i++) {
        ours[i] = argmax(g.logits, V);
        theirs[i] = argmax(fresh.logits, V);
        ok = generation_append(&g, &ours[i], 1, 0) == 0 &&
             generation_append(&fresh, &theirs[i], 1, 0) == 0;
    }
    int growths = 0;
    for (int n = first; n < n_ctx; n *= 2) growths++;
    check_true(ok && memcmp(ours, theirs, n_after * sizeof(int)) == 0 && g.n_alloc == n_ctx &&
               g.stats.grows == growths && g.stats.shifts == 1 && fresh.stats.shifts == 1,
               "growth: %d greedy tokens after it == the fresh run's; %ld growths (want %d) "
               "to %d positions, then one shift", n_after, g.stats.grows, growths, g.n_alloc);
    generation_free(&g);
done:
    generation_free(&fresh);
    free(grown);
    free(ours);
    free(theirs);
    Generation bad;
    check_true(generation_init(&bad, m, 8, 9, 0, 1) == -1 && generation_init(&bad, m, 8, 0, 0,
               1) == -1, "growth: a first size of 0 or above the context is refused");
}

#if !defined(OS_PLAIN_ALLOC)
/* Size of this process's address space in bytes (/proc/self/statm), or -1. */
static long address_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = -1, page = sysconf(_SC_PAGESIZE);
    if (f && fscanf(f, "%ld", &pages) != 1) pages = -1;
    if (f) fclose(f);
    return pages < 0 || page <= 0 ? -1 : pages * page;
}
#endif

/* A state of 64 positions (of a context of 256) that cannot grow, its memory held to
 * 64 KiB more than the process has (the shipped model's 128 positions need 0.6 MiB more):
 * the 65th token keeps the context at 64 and shifts it, and from there the logits and 40
 * greedy tokens are a run's with a context of 64 from the start, bitwise. A keep of 64 or
 * more (fine for 256) becomes 63, the most a context of 64 keeps (left at 100, the shift
 * moved a negative count). Not where an address-space limit cannot make the allocation
 * fail (a sanitizer, the plain allocator, valgrind: then skipped). */
static void check_grow_no_memory(Model *m, const int *prompt, int n_prompt, int keep) {
#if defined(OS_PLAIN_ALLOC)
    (void)m;
    (void)prompt;
    (void)n_prompt;
    (void)keep;
    check_skip("growth without memory: an address-space limit under a sanitizer or the plain "
               "allocator");
#else
    enum { FIRST = 64, CTX = 256, AFTER = 40 };
    int V = m->config.vocab_size, seq[FIRST + 1 + AFTER], n_seq = 0, ok = 1;
    int kept = keep < FIRST ? keep : FIRST - 1;   /* what a context of 64 keeps */
    Generation g, capped;
    memset(&capped, 0, sizeof capped);
    if (generation_init(&g, m, CTX, FIRST, keep, 1) != 0 ||
        generation_append(&g, prompt, n_prompt, 1) != 0) {
        check_true(0, "growth without memory: set up");
        generation_free(&g);
        return;
    }
    memcpy(seq, prompt, (size_t)n_prompt * sizeof(int));
    n_seq = n_prompt;
    while (ok && n_seq < FIRST) {
        seq[n_seq] = argmax(g.logits, V);
        ok = generation_append(&g, &seq[n_seq++], 1, 0) == 0;
    }
    struct rlimit old, low;
    long have = address_bytes();
    if (!ok || have < 0 || getrlimit(RLIMIT_AS, &old) != 0) {
        check_skip("growth without memory: no address-space limit to set");
        generation_free(&g);
        return;
    }
    low = old;
    low.rlim_cur = (rlim_t)(have + (64L << 10));
    seq[n_seq] = argmax(g.logits, V);
    int limited = setrlimit(RLIMIT_AS, &low) == 0;
    int appended = generation_append(&g, &seq[n_seq++], 1, 0);
    setrlimit(RLIMIT_AS, &old);
    if (!limited || g.stats.grows > 0) {
        check_skip("growth without memory: the limit did not make the growth fail");
        generation_free(&g);
        return;
    }
    check_true(appended == 0 && g.n_ctx == FIRST && g.n_alloc == FIRST && g.stats.shifts == 1 &&
               g.keep == kept, "growth without memory, keep %d: the context stays at %d and "
               "shifts, keeping %d (got %d, %d positions, %ld shifts, keep %d)", keep, FIRST,
               kept, g.n_ctx, g.n_alloc, g.stats.shifts, g.keep);
    for (int i = 0; i < AFTER && appended == 0; i++) {
        seq[n_seq] = argmax(g.logits, V);
        appended = generation_append(&g, &seq[n_seq++], 1, 0);
    }
    /* the same tokens, appended the same way, in a context of FIRST from the start */
    ok = appended == 0 && generation_init(&capped, m, FIRST, FIRST, kept, 1) == 0 &&
         generation_append(&capped, seq, n_prompt, 1) == 0;
    for (int i = n_prompt; ok && i < n_seq; i++)
        ok = generation_append(&capped, &seq[i], 1, 0) == 0;
    check_true(ok && memcmp(capped.logits, g.logits, (size_t)V * sizeof(float)) == 0 &&
               capped.stats.shifts == g.stats.shifts, "growth without memory, keep %d: after "
               "%d more greedy tokens, the logits of a context of %d from the start, bitwise "
               "(%ld shifts)", keep, AFTER, FIRST, g.stats.shifts);
    generation_free(&g);
    generation_free(&capped);
#endif
}

/* Shifting off: a token that does not fit is refused and nothing changes. */
static void check_full(Model *m) {
    Generation g;
    int ids[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int ok = generation_init(&g, m, 8, 8, 0, 0) == 0 && generation_append(&g, ids, 8, 1) == 0;
    int full = ok ? generation_append(&g, ids, 1, 0) : -1;
    check_true(full == GENERATE_FULL && g.n_tokens == 8 && g.stats.shifts == 0,
               "no shift: the 9th token of 8 positions is refused (GENERATE_FULL)");
    generation_free(&g);
    check_true(generation_init(&g, m, 8, 8, 8, 1) == -1, "keep == the context is refused");
    generation_free(&g);
}

/* n_prompt counts the prompt's tokens still in the context: the shift drops those after
 * the first `keep` with the rest (the map drew generated tokens as prompt after a shift),
 * and input that follows a generated token is no longer the prompt. */
static void check_prompt_count(Model *m) {
    static const struct { int keep, n_prompt, want; const char *what; } cases[] = {
        {2, 5, 2, "keep 2, a 5-token prompt: positions 2..4 dropped, 2 stay"},
        {0, 7, 3, "keep 0, a 7-token prompt: the 4 oldest dropped, 3 stay"},
        {4, 3, 3, "keep 4, a 3-token prompt: all kept"}};
    int ids[8] = {50, 100, 200, 300, 400, 500, 10, 20};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        Generation g;
        int ok = generation_init(&g, m, 8, 8, cases[c].keep, 1) == 0 &&
                 generation_append(&g, ids, cases[c].n_prompt, 1) == 0;
        int before = g.n_prompt;
        while (ok && g.stats.shifts == 0) ok = generation_append(&g, ids, 1, 0) == 0;
        check_true(ok && before == cases[c].n_prompt && g.n_prompt == cases[c].want,
                   "n_prompt after a shift, %s (got %d, before %d)", cases[c].what, g.n_prompt,
                   before);
        generation_free(&g);
    }
    /* keep 2 after a 2-token prompt, then 12 input tokens at once: a shift at the 7th and
     * at the 10th each drops 3 of them (6 lost), and the 8 positions hold the prompt, run
     * again, and the input's last 6 */
    Generation g;
    int line[12] = {50, 100, 200, 300, 400, 500, 10, 20, 30, 40, 60, 70};
    int ok = generation_init(&g, m, 8, 8, 2, 1) == 0 && generation_append(&g, ids, 2, 1) == 0 &&
             generation_append(&g, line, 12, 1) == 0;
    check_true(ok && g.stats.shifts == 2 && g.stats.rerun_tokens == 2 &&
               g.stats.input_tokens == 8, "input shifting part of itself out: the 2 kept "
               "tokens run again, 2 + 6 input tokens run (got %ld shifts, %ld run again, %ld "
               "input)", g.stats.shifts, g.stats.rerun_tokens, g.stats.input_tokens);
    generation_free(&g);
    ok = generation_init(&g, m, 8, 8, 0, 1) == 0 && generation_append(&g, ids, 2, 1) == 0 &&
             generation_append(&g, ids, 1, 0) == 0 && generation_append(&g, ids, 2, 1) == 0;
    check_true(ok && g.n_prompt == 2 && g.stats.input_tokens == 4, "input after a generated "
               "token (-I's lines) is not the prompt (n_prompt %d of 4 input tokens)",
               g.n_prompt);
    generation_free(&g);
}

/* A growth to exactly the whole context (4 positions, then 4 tokens more of 8) runs the 4
 * held tokens again as a growth's, not a shift's: 1 growth of 4 tokens, none run again
 * after a shift, 8 input tokens. */
static void check_grow_to_full(Model *m) {
    static const int ids[4] = {50, 100, 200, 300};
    Generation g;
    int ok = generation_init(&g, m, 8, 4, 0, 1) == 0 && generation_append(&g, ids, 4, 1) == 0 &&
             generation_append(&g, ids, 4, 1) == 0;
    check_true(ok && g.n_alloc == 8 && g.stats.grows == 1 && g.stats.grow_tokens == 4 &&
               g.stats.shifts == 0 && g.stats.rerun_tokens == 0 && g.stats.input_tokens == 8,
               "growth to the whole context (4 -> 8 positions): its 4 tokens run again as the "
               "growth's (got %d positions, %ld growths of %ld tokens, %ld run again after "
               "shifts, %ld input)", g.n_alloc, g.stats.grows, g.stats.grow_tokens,
               g.stats.rerun_tokens, g.stats.input_tokens);
    generation_free(&g);
}

/* generate(g, tok, ...) with stderr in err (cap bytes, NUL-terminated): greedy, quiet, at
 * most 4 tokens after the prompt; returns generate's status, or -1 if it could not run. */
static int generate_captured(Model *m, const Tokenizer *tok, const int *prompt, int n_prompt,
                             char *err, size_t cap, long *generated) {
    Generation g;
    Sampler s;
    GenerateOptions o = {.steps = 4, .quiet = 1};
    FILE *file = tmpfile();   /* unnamed: no file is left behind */
    int saved = dup(2), status = -1;
    err[0] = '\0';
    if (!file || saved < 0 || generation_init(&g, m, 16, 16, 0, 0) != 0) goto done;
    if (sampler_init(&s, m->config.vocab_size, 0.0f, 1.0f, 0, 1) == 0) {
        fflush(stderr);
        dup2(fileno(file), 2);
        status = generate(&g, tok, &s, &o, prompt, n_prompt);
        fflush(stderr);
        dup2(saved, 2);
        rewind(file);
        err[fread(err, 1, cap - 1, file)] = '\0';
        *generated = g.stats.generated;
        sampler_free(&s);
    }
    generation_free(&g);
done:
    if (saved >= 0) close(saved);
    if (file) fclose(file);
    return status;
}

/* A model that picks a token its tokenizer lacks (a larger vocabulary than the
 * tokenizer's: run refuses such a pair when it loads them, a caller of generate may not):
 * generation stops before printing it, with status 1 and one stderr line naming it. The
 * tokenizer is the shipped one cut short (its vocab_size lowered, its tables whole) just
 * before the token greedy picks after the prompt, found by this test's argmax; the whole
 * tokenizer, the control, generates all 4 tokens. */
static void check_token_tokenizer_lacks(Model *m) {
    static const int prompt[] = {10, 20, 30};   /* ids of the cut tokenizer too */
    Tokenizer tok;
    Generation g;
    if (tokenizer_load(&tok, SHIPPED_TOKENIZER) != 0) {
        check_true(0, "load %s", SHIPPED_TOKENIZER);
        return;
    }
    int ok = generation_init(&g, m, 16, 16, 0, 0) == 0 && generation_append(&g, prompt, 3, 1) == 0;
    int pick = ok ? argmax(g.logits, m->config.vocab_size) : -1;
    generation_free(&g);
    char err[512], want[160];
    long generated = -1;
    int status = generate_captured(m, &tok, prompt, 3, err, sizeof err, &generated);
    check_true(status == 0 && generated == 4 && err[0] == '\0', "the whole tokenizer: 4 "
               "greedy tokens, nothing on stderr (got status %d, %ld tokens, '%s')", status,
               generated, err);
    if (pick <= 30) {
        check_true(0, "greedy's first token after the prompt, past its ids (got %d)", pick);
        tokenizer_free(&tok);
        return;
    }
    Tokenizer cut = tok;   /* the tables whole, only ids below pick its own */
    cut.vocab_size = pick;
    snprintf(want, sizeof want, "generate: model produced token %d, which the tokenizer does "
             "not have (expected 0..%d)\n", pick, pick - 1);
    generated = -1;
    status = generate_captured(m, &cut, prompt, 3, err, sizeof err, &generated);
    check_true(status == 1 && generated == 0 && strcmp(err, want) == 0, "a token the "
               "tokenizer lacks (token %d, a tokenizer of %d): status 1, none printed, one line "
               "(got status %d, %ld tokens, '%s')", pick, pick, status, generated, err);
    tokenizer_free(&tok);
}

int main(void) {
    Model m;
    /* arbitrary ids of the shipped vocabulary */
    static const int prompt[] = {50, 100, 200, 300, 400, 500, 10};
    if (model_load(&m, SHIPPED_MODEL, 64, 0) != 0) {
        check_true(0, "load %s", SHIPPED_MODEL);
        return check_summary("test_generate");
    }
    check_shift_exact("shipped model, 32 positions, keep 0", &m, 32, 0, prompt, 7);
    check_shift_exact("shipped model, 128 positions, keep 3", &m, 128, 3, prompt, 7);
    AttentionConfig window;
    attention_config_default(&window);
    window.kind = ATTENTION_WINDOW;
    window.window = 8;
    window.sinks = 2;
    if (model_set_attention(&m, &window) == 0)
        check_shift_exact("shipped model, window w=8 sinks=2, 32 positions", &m, 32, 0, prompt, 7);
    else
        check_true(0, "window attention on the shipped model");
    check_full(&m);
    check_prompt_count(&m);
    check_token_tokenizer_lacks(&m);
    AttentionConfig exact;
    attention_config_default(&exact);
    if (model_set_attention(&m, &exact) == 0) {
        check_grow_exact(&m, 64, 4, prompt, 3);
        check_grow_to_full(&m);
        check_grow_no_memory(&m, prompt, 7, 0);
        check_grow_no_memory(&m, prompt, 7, 100);
    } else {
        check_true(0, "exact attention on the shipped model");
    }
    model_free(&m);

    const char *llama = check_data_file("llama2c/s260k.bin");
    if (!llama) {
        check_skip("llama2c/s260k.bin not found: the Llama shift (BOS kept) not checked");
    } else if (model_load(&m, llama, 64, 0) == 0) {
        static const int bos_prompt[] = {1, 403, 407, 261, 378};   /* BOS, then story ids */
        check_shift_exact("s260k, 24 positions, BOS kept", &m, 24, 1, bos_prompt, 5);
        model_free(&m);
    } else {
        check_true(0, "load %s", llama);
    }
    return check_summary("test_generate");
}
