/* model.c: the forward pass of a GPT-2 or Llama model, and its attention state.
 *
 * The forward pass: embeddings, L blocks (block.c, the code the trainer runs too), final
 * norm, logits. The two families differ in four places: LayerNorm vs RMSNorm and GELU vs
 * SwiGLU (branches on config.family in block.c), learned vs rotary positions (block_rotary:
 * every Llama, and a GPT-2 trained with rotary ones, which has no position table), tied vs
 * separate classifier (chosen when checkpoint.c loads the file).
 * The plain path (plain_layers) is the one to read: exact attention keeps its keys and
 * values in a KV cache (of floats, or halves) and calls attention_forward_cache (or its
 * _half). Three things take the other path (lab_layers), by one test in model_forward: the
 * lab's variants, which keep their own state and go through attention_step; tracing (for
 * the heatmaps), which copies each layer's queries and keys; and a GGUF model, whose q, k
 * and v are rounded as llama.cpp's F16 cache rounds them. Loading is in checkpoint.c, the
 * arithmetic in kernels.c, attention in attention.c.
 *
 * Legend: n tokens in the chunk (model.h's N), t a token's index in it, C width, Hd MLP
 * width, KVD kv width, V vocab, S context, l layer.
 */
#include "model.h"

#include <math.h>       /* sqrtf */
#include <stdint.h>     /* SIZE_MAX, uint16_t */
#include <stdio.h>      /* fprintf(stderr) */
#include <stdlib.h>     /* calloc, free */
#include <string.h>     /* memcpy, memset */

#include "attention.h"  /* attention_forward_cache, attention_step and the lab's state */
#include "block.h"      /* block_qkv, block_finish, block_norm, block_matmul */
#include "kernels.h"    /* kernels_parallel_for, kernels_to_half, kernels_from_half */
#include "os.h"         /* os_alloc_zeroed, os_free_zeroed, os_commit(_keep) */
#include "quant.h"      /* quant_dequantize_row */

/* ------------------------------------------------------------------------- */
/* Load and free                                                               */

/* The activations for chunks of `rows` tokens, as parts of one allocation (os_alloc_parts:
 * their pages come 2 MiB at a time where the system can, rather than a page fault per
 * 4 KiB): m->chunk_rows of them are allocated. */
#define STATE_PARTS 18
static void state_parts(Model *m, int rows, OsPart part[STATE_PARTS]) {
    const Config *c = &m->config;
    size_t N = (size_t)rows;
    size_t widest = (size_t)(c->dim > c->hidden_dim ? c->dim : c->hidden_dim);
    RunState *s = &m->state;
    /* the bytes of an (N, C), (N, KVD) and (N, Hd) buffer of floats */
    size_t c_bytes = N * (size_t)c->dim * sizeof(float);
    size_t kvd_bytes = N * (size_t)c->kv_dim * sizeof(float);
    size_t hd_bytes = N * (size_t)c->hidden_dim * sizeof(float);
    OsPart parts[STATE_PARTS] = {
        {(void **)&s->x, c_bytes}, {(void **)&s->xn1, c_bytes}, {(void **)&s->q, c_bytes},
        {(void **)&s->k, kvd_bytes}, {(void **)&s->v, kvd_bytes}, {(void **)&s->att, c_bytes},
        {(void **)&s->proj, c_bytes}, {(void **)&s->x_mid, c_bytes}, {(void **)&s->xn2, c_bytes},
        {(void **)&s->pre, hd_bytes}, {(void **)&s->act, hd_bytes}, {(void **)&s->gate, hd_bytes},
        {(void **)&s->out, c_bytes}, {(void **)&s->xn_final, c_bytes},
        {(void **)&s->logits, N * (size_t)c->vocab_size * sizeof(float)},
        {(void **)&s->xq, N * widest},
        {(void **)&s->xs, N * widest * sizeof(float)},   /* at most one scale per value */
        {(void **)&s->rope, N * (size_t)c->head_dim * sizeof(float)},
    };
    memcpy(part, parts, sizeof parts);
}

static int alloc_state(Model *m) {
    OsPart part[STATE_PARTS];
    state_parts(m, m->chunk_rows, part);
    return os_alloc_parts(part, STATE_PARTS);
}

/* Frees the attention state (KV cache or the lab's blocks) and its scratch. */
static void free_attention(Model *m) {
    os_free_zeroed(m->cache.k);
    os_free_zeroed(m->cache.v);
    os_free_zeroed(m->cache.k_half);
    os_free_zeroed(m->cache.v_half);
    free(m->attention_state);
    free(m->attention_configs);
    free(m->attention_offset);
    free(m->state.scratch);
    free(m->trace.q);
    free(m->trace.k);
    free(m->trace.scratch);
    m->trace.q = m->trace.k = m->trace.scratch = NULL;
    m->cache.k = m->cache.v = m->state.scratch = NULL;
    m->cache.k_half = m->cache.v_half = NULL;
    m->attention_state = NULL;
    m->attention_configs = NULL;
    m->attention_offset = NULL;
    m->attention_bytes = 0;
}

int model_attention_is_plain(const AttentionConfig *cfg) {
    return cfg->kind == ATTENTION_EXACT && !cfg->softmax1 && !cfg->sink_logit &&
           !cfg->unscaled && cfg->tau == 1.0f;
}

/* Bytes of exact attention's KV cache for n_alloc positions: keys and values, all layers,
 * in floats or (half) halves. */
static size_t kv_cache_bytes(const Config *c, int n_alloc, int half) {
    size_t value = half ? sizeof(uint16_t) : sizeof(float);
    return 2 * value * (size_t)c->n_layers * (size_t)n_alloc * (size_t)c->kv_dim;
}

/* Floats of scratch exact attention needs over that cache. */
static size_t kv_scratch_floats(const Model *m, int n_alloc) {
    return m->half_cache ? attention_half_scratch_floats(&m->heads, n_alloc)
                         : attention_scratch_floats(&m->heads, n_alloc);
}

/* state_bytes plus scratch_floats floats, or SIZE_MAX if that overflows (so that the
 * limit below refuses it). */
static size_t state_plus_scratch(size_t state_bytes, size_t scratch_floats) {
    size_t scratch_bytes;
    if (checkpoint_size_mul(scratch_floats, sizeof(float), &scratch_bytes) != 0 ||
        scratch_bytes > SIZE_MAX - state_bytes) return SIZE_MAX;
    return state_bytes + scratch_bytes;
}

/* Refuses (with a message) an attention state larger than MODEL_MAX_STATE_BYTES. */
static int check_state_size(const char *what, size_t bytes, int n_alloc) {
    if (bytes <= MODEL_MAX_STATE_BYTES) return 0;
    fprintf(stderr, "model: attention %s for %d positions needs %zu MiB (expected at most "
            "%zu MiB, MODEL_MAX_STATE_BYTES: use a shorter context or a smaller variant)\n",
            what, n_alloc, bytes >> 20, (size_t)MODEL_MAX_STATE_BYTES >> 20);
    return -1;
}

/* The most positions of exact attention's KV cache, in m->half_cache's precision, and its
 * score rows (as model_set_attention counts them) that MODEL_MAX_STATE_BYTES holds, at
 * most the model's context S: a header's huge context is cut to that. 0 after a stderr
 * line naming what if not even one position fits. */
static int max_positions(const Model *m, const char *what) {
    size_t per_position = state_plus_scratch(kv_cache_bytes(&m->config, 1, m->half_cache),
                                             kv_scratch_floats(m, 1));
    size_t fit = MODEL_MAX_STATE_BYTES / per_position;
    if (fit < 1)
        fprintf(stderr, "model: %s: one position of KV cache needs %zu bytes (expected at most "
                "%zu)\n", what, per_position, (size_t)MODEL_MAX_STATE_BYTES);
    return fit < (size_t)m->config.seq_len ? (int)fit : m->config.seq_len;
}

/* While tracing, allocates the trace for m->n_alloc positions (after the attention state:
 * the weights' scratch depends on the variant). */
static int alloc_trace(Model *m) {
    if (!m->tracing) return 0;
    const Config *c = &m->config;
    size_t rows = (size_t)c->n_layers * (size_t)m->n_alloc, q_floats, k_floats;
    /* a product that wraps (32-bit size_t) allocates nothing: refused below */
    if (checkpoint_size_mul(rows, (size_t)c->dim, &q_floats) == 0 &&
        checkpoint_size_mul(rows, (size_t)c->kv_dim, &k_floats) == 0) {
        m->trace.q = calloc(q_floats, sizeof(float));
        m->trace.k = calloc(k_floats, sizeof(float));
    }
    size_t scratch = 0;
    for (int l = 0; l < c->n_layers; l++) {
        size_t layer = attention_weights_scratch_floats(&m->attention_configs[l],
                                                        &m->heads, m->n_alloc);
        if (layer > scratch) scratch = layer;
    }
    m->trace.scratch = calloc(scratch + 1, sizeof(float));
    if (m->trace.q && m->trace.k && m->trace.scratch) return 0;
    fprintf(stderr, "model: out of memory for the attention trace (%d layers of %d "
            "positions)\n", c->n_layers, m->n_alloc);
    free_attention(m);
    return -1;
}

/* 1 if every layer of cfgs (L,) is plain (model_attention_is_plain). */
static int all_plain(const AttentionConfig *cfgs, int L) {
    for (int l = 0; l < L; l++)
        if (!model_attention_is_plain(&cfgs[l])) return 0;
    return 1;
}

/* Layer l's attention as it will run: cfg, with the checkpoint's trained sink logits for
 * that layer when cfg asks for learned ones and names none, and a Synthesizer's trained
 * parameters when the checkpoint's layer l was trained as the same Synthesizer (else
 * none: model_set_attention_layers refuses it). */
static AttentionConfig layer_config(const Model *m, const AttentionConfig *cfg, int l) {
    AttentionConfig out = *cfg;
    const Checkpoint *ck = &m->checkpoint;
    if (out.sink_logit && !out.sink_logits && ck->sink_logits)
        out.sink_logits = ck->sink_logits + (size_t)l * m->config.n_heads;
    if (!out.sink_logit) out.sink_logits = NULL;
    out.synth_len = m->config.seq_len;
    const AttentionConfig *trained = ck->attention ? &ck->attention[l] : NULL;
    if (attention_is_synth(out.kind) && !out.synth && trained && trained->kind == out.kind &&
        trained->factor == out.factor)
        out.synth = trained->synth;
    if (!attention_is_synth(out.kind)) out.synth = NULL;
    return out;
}

int model_set_attention_layers(Model *m, const AttentionConfig *cfgs) {
    const Config *c = &m->config;
    int n_alloc = m->n_alloc, L = c->n_layers;
    free_attention(m);
    /* the model's from here: free_attention frees them with the rest on any failure */
    AttentionConfig *kept = m->attention_configs = malloc((size_t)L * sizeof *kept);
    size_t *offset = m->attention_offset = malloc((size_t)(L + 1) * sizeof *offset);
    if (!kept || !offset) {
        free_attention(m);
        fprintf(stderr, "model: out of memory for %d layers' attention\n", L);
        return -1;
    }
    for (int l = 0; l < L; l++) {
        kept[l] = layer_config(m, &cfgs[l], l);
        char problem[256];
        if (attention_context_check(&kept[l], c->seq_len, problem, sizeof problem) != 0) {
            fprintf(stderr, "model: attention of layer %d: %s\n", l, problem);
            free_attention(m);
            return -1;
        }
        if (attention_is_synth(kept[l].kind) && !kept[l].synth) {
            char spec[64];   /* the --attn spec that trains one */
            AttentionKind kind = kept[l].kind;
            int n = snprintf(spec, sizeof spec, "%s", attention_kind_name(kind));
            if (kind == ATTENTION_SYNTH_FRANDOM || kind == ATTENTION_SYNTH_FDENSE)
                snprintf(spec + n, sizeof spec - (size_t)n, ":%s=%d",
                         kind == ATTENTION_SYNTH_FRANDOM ? "rank" : "a", kept[l].factor);
            fprintf(stderr, "model: attention %s (layer %d): a Synthesizer's weights are "
                    "trained parameters, and this model has none for it (expected a model "
                    "trained with ./train --attn %s)\n", spec, l, spec);
            free_attention(m);
            return -1;
        }
    }
    if (all_plain(kept, L)) {
        /* the KV cache and the score rows (a block of queries' rows of n_alloc floats per
         * head) count toward the limit together */
        size_t scratch_floats = kv_scratch_floats(m, n_alloc);
        if (check_state_size("exact (KV cache)",
                             state_plus_scratch(kv_cache_bytes(c, n_alloc, m->half_cache),
                                                scratch_floats),
                             n_alloc) != 0) {
            free_attention(m);
            return -1;
        }
        /* pages come 2 MiB at a time where the system grants huge pages (os_alloc_zeroed):
         * each then holds several heads' rows for all n_alloc positions, so a first write
         * commits most of the cache (model_set_context commits it all first); their reach
         * in the TLB pays at long contexts, where attention reads the whole cache */
        size_t values = (size_t)L * (size_t)n_alloc * (size_t)c->kv_dim;
        if (m->half_cache) {
            m->cache.k_half = os_alloc_zeroed(values, sizeof(uint16_t));
            m->cache.v_half = os_alloc_zeroed(values, sizeof(uint16_t));
        } else {
            m->cache.k = os_alloc_zeroed(values, sizeof(float));
            m->cache.v = os_alloc_zeroed(values, sizeof(float));
        }
        m->state.scratch = calloc(scratch_floats, sizeof(float));
        if (!(m->half_cache ? m->cache.k_half && m->cache.v_half : m->cache.k && m->cache.v) ||
            !m->state.scratch)
            goto out_of_memory;
        m->attention_bytes = kv_cache_bytes(c, n_alloc, m->half_cache);   /* keys and values */
        m->lab = 0;
        return alloc_trace(m);
    }
    /* one block for all layers, carved into cache-line-aligned parts, one per layer (a
     * hybrid's layers differ in size); the scratch is the largest any layer needs */
    size_t total = 0, scratch = 0;
    const char *kinds = attention_kind_name(kept[0].kind);
    for (int l = 0; l < L; l++) {
        const AttentionConfig *cfg = &kept[l];
        size_t layer_bytes = attention_state_bytes(cfg, &m->heads, n_alloc);
        size_t layer_scratch = attention_step_scratch_floats(cfg, &m->heads, n_alloc);
        if (layer_bytes == 0 || layer_scratch == 0) {
            fprintf(stderr, "model: attention %s (layer %d): invalid parameters for this model "
                    "(%d heads of %d, context %d)\n", attention_kind_name(cfg->kind), l,
                    c->n_heads, c->head_dim, n_alloc);
            free_attention(m);
            return -1;
        }
        if (cfg->kind != kept[0].kind) kinds = "of these layers";
        offset[l] = total;
        if (layer_bytes > SIZE_MAX - total) total = SIZE_MAX;
        else total += layer_bytes;
        if (layer_scratch > scratch) scratch = layer_scratch;
    }
    offset[L] = total;
    if (check_state_size(kinds, state_plus_scratch(total, scratch), n_alloc) != 0) {
        free_attention(m);
        return -1;
    }
    m->attention_state = calloc(total, 1);
    m->state.scratch = calloc(scratch, sizeof(float));
    if (!m->attention_state || !m->state.scratch) goto out_of_memory;
    for (int l = 0; l < L; l++)   /* cannot fail: attention_state_bytes took each cfg */
        attention_state_init(&kept[l], &m->heads, n_alloc, l,
                             (char *)m->attention_state + offset[l]);
    m->attention_bytes = total;
    m->lab = 1;
    return alloc_trace(m);
out_of_memory:
    fprintf(stderr, "model: attention %s: out of memory for %d layers of %d positions\n",
            attention_kind_name(kept[0].kind), L, n_alloc);
    free_attention(m);
    return -1;
}

int model_set_attention(Model *m, const AttentionConfig *cfg) {
    int L = m->config.n_layers;
    AttentionConfig *cfgs = malloc((size_t)L * sizeof *cfgs);
    if (!cfgs) {
        fprintf(stderr, "model: out of memory for %d layers' attention\n", L);
        return -1;
    }
    for (int l = 0; l < L; l++) cfgs[l] = *cfg;
    int status = model_set_attention_layers(m, cfgs);
    free(cfgs);
    return status;
}

/* Sets the attention again (after a change of context or tracing), as it was; if that
 * fails, its layers' configs stay for another try. Returns 0, or -1 after a stderr line
 * (also when a failed model_set_attention_layers left none). */
static int reset_attention(Model *m) {
    AttentionConfig *cfgs = m->attention_configs;
    if (!cfgs) {
        fprintf(stderr, "model: no attention to set up again (the last model_set_attention "
                "failed; expected one that succeeded)\n");
        return -1;
    }
    m->attention_configs = NULL;   /* free_attention must not free what it reads */
    int status = model_set_attention_layers(m, cfgs);
    if (status != 0 && !m->attention_configs) m->attention_configs = cfgs;
    else free(cfgs);
    return status;
}

/* Commits the memory a run writes (the attention state, the activations of max_chunk
 * tokens) now, not a page fault at a time in the first prompt (llama.cpp also clears its
 * cache when it sets up). Every forward pass writes the activations before it reads them,
 * so their old values may go. Two keep theirs: the logits, which a caller may still read
 * (only their first row is committed, the one every forward pass writes; --eval commits
 * the others as it writes them), and a variant's state, which holds its random matrices
 * (Performer's, LSH's). */
static void commit_memory(Model *m) {
    OsPart part[STATE_PARTS];
    state_parts(m, m->max_chunk, part);   /* the first m->max_chunk rows of each */
    for (int i = 0; i < STATE_PARTS; i++)
        if (part[i].at != (void **)&m->state.logits) os_commit(*part[i].at, part[i].bytes);
    os_commit_keep(m->state.logits, (size_t)m->config.vocab_size * sizeof(float));
    if (m->lab) {   /* holds the variants' random matrices, drawn already */
        os_commit_keep(m->attention_state, m->attention_bytes);
    } else if (m->half_cache) {   /* attention_bytes: keys and values */
        os_commit(m->cache.k_half, m->attention_bytes / 2);
        os_commit(m->cache.v_half, m->attention_bytes / 2);
    } else {
        os_commit(m->cache.k, m->attention_bytes / 2);
        os_commit(m->cache.v, m->attention_bytes / 2);
    }
}

int model_set_context(Model *m, int n_alloc) {
    if (n_alloc < 1 || n_alloc > m->max_ctx) {
        fprintf(stderr, "model: context out of range (got %d, expected 1..%d)\n", n_alloc,
                m->max_ctx);
        return -1;
    }
    m->n_alloc = n_alloc;
    m->max_chunk = m->chunk_rows < n_alloc ? m->chunk_rows : n_alloc;
    if (reset_attention(m) != 0) return -1;
    commit_memory(m);
    return 0;
}

int model_load(Model *m, const char *path, int max_chunk, int n_alloc) {
    memset(m, 0, sizeof *m);
    if (max_chunk < 1) {
        fprintf(stderr, "model: %s: chunk size out of range (got %d, expected >= 1)\n",
                path, max_chunk);
        return -1;
    }
    if (checkpoint_load(&m->checkpoint, path) != 0) return -1;
    checkpoint_pack(&m->checkpoint);   /* int8 rows as this build reads them fastest */
    const Config *c = &m->checkpoint.config;
    m->config = *c;
    m->format = m->checkpoint.format;
    m->heads.n_heads = c->n_heads;
    m->heads.n_kv_heads = c->n_kv_heads;
    m->heads.head_dim = c->head_dim;
    m->heads.scale = 1.0f / sqrtf((float)c->head_dim);
    m->half_cache = c->half_kv;   /* a GGUF model's keys and values are halves already */
    if ((m->max_ctx = max_positions(m, path)) < 1) goto fail;
    if (n_alloc < 0 || n_alloc > m->max_ctx) {
        fprintf(stderr, "model: %s: context out of range (got %d, expected 0 for the model's "
                "or 1..%d)\n", path, n_alloc, m->max_ctx);
        goto fail;
    }
    m->n_alloc = n_alloc ? n_alloc : m->max_ctx;
    m->chunk_rows = max_chunk < m->max_ctx ? max_chunk : m->max_ctx;
    m->max_chunk = m->chunk_rows < m->n_alloc ? m->chunk_rows : m->n_alloc;
    if (alloc_state(m) != 0) {
        fprintf(stderr, "model: %s: out of memory for activations\n", path);
        goto fail;
    }
    if (m->checkpoint.attention) {   /* a variant's model runs the attention it learned */
        if (model_set_attention_layers(m, m->checkpoint.attention) != 0) goto fail;
        return 0;
    }
    AttentionConfig exact;
    attention_config_default(&exact);
    if (model_set_attention(m, &exact) != 0) goto fail;
    return 0;
fail:
    model_free(m);
    return -1;
}

int model_set_half_cache(Model *m, int half) {
    int was = m->half_cache, max_ctx;
    m->half_cache = half != 0;
    if ((max_ctx = max_positions(m, half ? "f16 KV cache" : "f32 KV cache")) < 1) {
        m->half_cache = was;
        return -1;
    }
    m->max_ctx = max_ctx;   /* halves hold more positions of a deep model, fewer of a shallow */
    if (m->n_alloc > max_ctx) m->n_alloc = max_ctx;
    m->max_chunk = m->chunk_rows < m->n_alloc ? m->chunk_rows : m->n_alloc;
    return reset_attention(m);
}

int model_trace(Model *m, int on) {
    m->tracing = on;
    return reset_attention(m);
}

int model_attention_weights(Model *m, int layer, int q0, int T, float *w) {
    const Config *c = &m->config;
    if (!m->tracing || !m->trace.q || layer < 0 || layer >= c->n_layers || q0 < 0 || q0 >= T ||
        T > m->n_alloc) {
        fprintf(stderr, "model: attention weights of layer %d, queries %d..%d out of range "
                "(expected tracing on, layer 0..%d, 0 <= q0 < T <= %d)\n", layer, q0, T - 1,
                c->n_layers - 1, m->n_alloc);
        return -1;
    }
    const float *q_l = m->trace.q + (size_t)layer * m->n_alloc * c->dim;      /* (n_alloc, C) */
    const float *k_l = m->trace.k + (size_t)layer * m->n_alloc * c->kv_dim;   /* (n_alloc, KVD) */
    const void *state_l = m->lab ? (char *)m->attention_state + m->attention_offset[layer]
                                 : NULL;
    return attention_weights(&m->attention_configs[layer], &m->heads, state_l, m->n_alloc, w, q_l,
                             k_l, q0, T, m->trace.scratch);
}

double model_macs_per_token(const Model *m) {
    const Config *c = &m->config;
    double C = c->dim, KVD = c->kv_dim, Hd = c->hidden_dim;
    double per_layer = C * C * 2 + C * KVD * 2 + C * Hd * (c->family == MODEL_LLAMA ? 3 : 2);
    return per_layer * c->n_layers + C * c->vocab_size;
}

void model_free(Model *m) {
    checkpoint_free(&m->checkpoint);
    free_attention(m);
    OsPart part[STATE_PARTS];
    state_parts(m, m->chunk_rows, part);
    os_free_parts(part, STATE_PARTS);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------------------- */
/* Layer pieces                                                                */

/* x (n, C) = token embedding rows (+ position rows for learned positions). */
static void embed(const Model *m, float *x, const int *tokens, int n, int pos) {
    const Weights *w = &m->checkpoint.weights;
    int C = m->config.dim;
    for (int t = 0; t < n; t++) {
        float *x_t = x + (size_t)t * C;
        if (w->token_embedding.f32)
            memcpy(x_t, w->token_embedding.f32 + (size_t)tokens[t] * C, (size_t)C * sizeof(float));
        else if (w->token_embedding.f16)   /* a GGUF F16 file's halves */
            kernels_from_half(x_t, w->token_embedding.f16 + (size_t)tokens[t] * C, (size_t)C);
        else
            quant_dequantize_row(x_t, &w->token_embedding.q8, tokens[t]);
        if (w->pos_embedding) {
            const float *wpe_t = w->pos_embedding + (size_t)(pos + t) * C;
            for (int i = 0; i < C; i++) x_t[i] += wpe_t[i];
        }
    }
}

/* One block's buffers: each of the state's buffers under its own name. */
static BlockBuffers block_buffers(RunState *s) {
    BlockBuffers b = {.x = s->x, .xn1 = s->xn1, .q = s->q, .k = s->k, .v = s->v, .att = s->att,
                      .proj = s->proj, .x_mid = s->x_mid, .xn2 = s->xn2, .pre = s->pre,
                      .act = s->act, .gate = s->gate, .out = s->out, .rope = s->rope,
                      .xq = s->xq, .xs = s->xs};
    return b;
}

/* After a block: its output b->out is the next block's input b->x (the two buffers
 * swap names in b; no copy, and the state's own names stay as allocated). */
static void next_block(BlockBuffers *b) {
    float *x = b->x;
    b->x = b->out;
    b->out = x;
}

/* Where layer l's part of the KV cache starts: its keys (NKV, n_alloc, HS) at cache.k (or
 * k_half) + this, its values the same way. */
static size_t cache_layer(const Model *m, int l) {
    return (size_t)l * (size_t)m->n_alloc * (size_t)m->config.kv_dim;
}

/* cache_append's arguments, for its jobs. */
typedef struct {
    const Model *m;
    int l, pos, n;
    const float *k, *v;
} AppendJob;

#define APPEND_ROWS_PER_JOB 64   /* positions per job of cache_append */

/* Positions pos + t0 .. pos + t1 - 1 of every kv head (t1 - t0 <= APPEND_ROWS_PER_JOB). */
static void append_job(void *ctx, int j) {
    const AppendJob *a = ctx;
    const Model *m = a->m;
    int NKV = m->config.n_kv_heads, HS = m->config.head_dim, KVD = m->config.kv_dim;
    size_t t0, t1;
    kernels_job_range(&t0, &t1, j, (size_t)a->n, APPEND_ROWS_PER_JOB);
    for (int g = 0; g < NKV; g++)
        for (size_t t = t0; t < t1; t++) {
            size_t row = cache_layer(m, a->l) +
                         ((size_t)g * (size_t)m->n_alloc + (size_t)a->pos + t) * (size_t)HS;
            size_t at = t * KVD + (size_t)g * HS;   /* position t's head g in the chunk */
            const float *k_t = a->k + at, *v_t = a->v + at;
            if (m->half_cache) {
                kernels_to_half(m->cache.k_half + row, k_t, (size_t)HS);
                kernels_to_half(m->cache.v_half + row, v_t, (size_t)HS);
            } else {
                float *k_c = m->cache.k + row, *v_c = m->cache.v + row;
                for (int i = 0; i < HS; i++) {   /* a few dozen floats: no memcpy calls */
                    k_c[i] = k_t[i];
                    v_c[i] = v_t[i];
                }
            }
        }
}

/* The chunk's keys k and values v (n, KVD) into layer l's KV cache at positions pos ..
 * pos+n-1: each kv head's HS values of a position into that head's row (as halves in a
 * half cache), that is cache.k[l, g, pos + t, :] = k[t, g HS .. (g + 1) HS - 1] for each kv
 * head g and row t, and the same for v. A prompt's rows go in jobs on every thread: a
 * serial copy here would leave the other threads waiting (and, waiting long, asleep when
 * attention needs them). */
static void cache_append(Model *m, int l, int pos, int n, const float *k, const float *v) {
    AppendJob a = {m, l, pos, n, k, v};
    kernels_parallel_for(append_job, &a, kernels_jobs((size_t)n, APPEND_ROWS_PER_JOB),
                         2.0 * n * m->config.kv_dim);
}

/* Exact attention of the chunk's queries b->q over layer l's cache, positions 0 ..
 * pos+n-1 (floats, or halves), into b->att. */
static void attend_cache(Model *m, int l, int pos, int n, const BlockBuffers *b) {
    size_t at = cache_layer(m, l);
    if (m->half_cache)
        attention_forward_cache_half(&m->heads, b->att, b->q, m->cache.k_half + at,
                                     m->cache.v_half + at, m->n_alloc, pos, n, m->state.scratch);
    else
        attention_forward_cache(&m->heads, b->att, b->q, m->cache.k + at,
                                m->cache.v + at, m->n_alloc, pos, n, m->state.scratch);
}

/* The rows of the chunk that layer l carries to its output: all of them, but in the last
 * layer only rows first .. n-1, those the logits read (as llama.cpp does). The other
 * rows' keys and values still go into the cache, which is all that later tokens read of
 * them; this saves the last layer's attention, W_O and MLP for a prompt's other rows. */
static int first_row(const Config *c, int l, int first) {
    return l == c->n_layers - 1 ? first : 0;
}

/* b's rows from row r on, in the buffers that carry a row from attention to the block's
 * output (q, att, x and out, each (n, C)); the others are scratch used from their start. */
static BlockBuffers rows_from(BlockBuffers b, int r, int C) {
    size_t at = (size_t)r * (size_t)C;
    b.q += at;
    b.att += at;
    b.x += at;
    b.out += at;
    return b;
}

/* The plain path, what the tutorial shows: every layer's q, k, v, the keys and values
 * appended to the KV cache at positions pos .. pos+n-1, exact attention of the chunk's
 * queries over the cache's positions 0 .. pos+n-1, the rest of the block; b->x (n, C) in
 * and out (in its rows first .. n-1: first_row; b->x names the last block's output). */
static void plain_layers(Model *m, BlockBuffers *b, int n, int pos, int first) {
    const Config *c = &m->config;
    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *w = &m->checkpoint.weights.layers[l];
        block_qkv(c, w, n, b);
        cache_append(m, l, pos, n, b->k, b->v);
        int r = first_row(c, l, first);
        BlockBuffers o = rows_from(*b, r, c->dim);   /* rows r .. n-1 from here on */
        attend_cache(m, l, pos + r, n - r, &o);
        block_finish(c, w, l, n - r, &o, NULL);
        next_block(b);
    }
}

/* While tracing, copies layer l's queries q (n, C) and keys k (n, KVD) of positions
 * pos .. pos+n-1 into the trace. */
static void trace(Model *m, int l, int pos, int n, const float *q, const float *k) {
    if (!m->tracing) return;
    size_t C = (size_t)m->config.dim, KVD = (size_t)m->config.kv_dim;
    size_t row = (size_t)l * m->n_alloc + (size_t)pos;
    memcpy(m->trace.q + row * C, q, (size_t)n * C * sizeof(float));
    memcpy(m->trace.k + row * KVD, k, (size_t)n * KVD * sizeof(float));
}

/* x (n,) rounded to the nearest IEEE half-precision values (ties to even), in place. */
static void round_half(float *x, size_t n) {
    uint16_t h[256];
    for (size_t i = 0; i < n; i += 256) {
        size_t len = n - i < 256 ? n - i : 256;
        kernels_to_half(h, x + i, len);
        kernels_from_half(x + i, h, len);
    }
}

/* q (n, C), k and v (n, KVD) rounded to half precision: llama.cpp keeps keys and values in
 * an F16 cache by default and converts q to F16 for the q.k products, and the greedy text
 * of a GGUF file follows these roundings where two logits nearly tie (docs/formats.md). */
static void round_half_kv(const Config *c, float *q, float *k, float *v, int n) {
    round_half(q, (size_t)n * c->dim);
    round_half(k, (size_t)n * c->kv_dim);
    round_half(v, (size_t)n * c->kv_dim);
}

/* The lab's path: plain_layers with a variant's attention (attention_step over its own
 * state, which takes the chunk's keys and values in, all n rows in every layer) where the
 * model has one, each layer's queries and keys kept for the heatmaps while tracing, and a
 * GGUF model's q, k and v rounded as llama.cpp's F16 cache rounds them (Config.half_kv);
 * buffers as plain_layers takes them. Returns 0, or -1 after a stderr line (a variant that
 * cannot continue at pos). */
static int lab_layers(Model *m, BlockBuffers *buffers, int n, int pos, int first) {
    const Config *c = &m->config;
    RunState *s = &m->state;
    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *w = &m->checkpoint.weights.layers[l];
        BlockBuffers b = *buffers;   /* this layer's (a Synthesizer's without rope) */
        if (m->lab && attention_is_synth(m->attention_configs[l].kind))
            b.rope = NULL;   /* a Synthesizer reads q as the token's, unrotated */
        block_qkv(c, w, n, &b);
        if (c->half_kv) round_half_kv(c, b.q, b.k, b.v, n);   /* a GGUF model: llama.cpp's */
        trace(m, l, pos, n, b.q, b.k);
        int r = first_row(c, l, first);
        BlockBuffers o = rows_from(b, r, c->dim);
        if (!m->lab) {   /* exact attention (traced) keeps its KV cache */
            cache_append(m, l, pos, n, b.k, b.v);
            attend_cache(m, l, pos + r, n - r, &o);
        } else {         /* a variant its own state */
            void *state_l = (char *)m->attention_state + m->attention_offset[l];
            if (attention_step(&m->attention_configs[l], &m->heads, state_l, m->n_alloc,
                               b.att, b.q, b.k, b.v, pos, n, s->scratch) != 0) {
                fprintf(stderr, "model: attention %s cannot continue at position %d (the "
                        "sequence so far ends at another position; start again at 0)\n",
                        attention_kind_name(m->attention_configs[l].kind), pos);
                return -1;
            }
        }
        block_finish(c, w, l, n - r, &o, NULL);
        next_block(buffers);
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Forward pass                                                                */

float *model_forward(Model *m, const int *tokens, int n, int pos, int all_logits) {
    const Config *c = &m->config;
    const Weights *w = &m->checkpoint.weights;
    RunState *s = &m->state;
    if (n < 1 || n > m->max_chunk || pos < 0 || pos > m->n_alloc - n) {
        fprintf(stderr, "model: forward of %d tokens at position %d out of range (expected "
                "1..%d tokens ending within the attention state's %d positions)\n",
                n, pos, m->max_chunk, m->n_alloc);
        return NULL;
    }
    for (int t = 0; t < n; t++) {
        if (tokens[t] < 0 || tokens[t] >= c->vocab_size) {
            fprintf(stderr, "model: token id out of range (got %d, expected 0..%d)\n",
                    tokens[t], c->vocab_size - 1);
            return NULL;
        }
    }
    if (!m->state.scratch) {
        fprintf(stderr, "model: no attention state (model_set_attention failed)\n");
        return NULL;
    }
    int C = c->dim;
    BlockBuffers b = block_buffers(s);
    embed(m, b.x, tokens, n, pos);
    if (block_rotary(c))   /* once for every layer */
        block_rope_angles(c, w->rope_freqs, s->rope, n, pos);

    /* the L blocks, b.x updated in the rows the logits read (first .. n-1): the plain
     * path, or the lab's (a variant, tracing, or a GGUF model's roundings) */
    int first = all_logits ? 0 : n - 1, rows = n - first;
    if (!m->lab && !m->tracing && !c->half_kv) plain_layers(m, &b, n, pos, first);
    else if (lab_layers(m, &b, n, pos, first) != 0) return NULL;

    /* final norm, then logits (rows, V) = xn_final (rows, C) . classifier (V, C)^T; b.x
     * names the last block's output (next_block swapped it with out after each block) */
    block_norm(c, s->xn_final, b.x + (size_t)first * C, w->norm_final_w, w->norm_final_b,
               rows);
    block_matmul(s->logits, s->xn_final, &w->classifier, NULL, rows, C, c->vocab_size, s->xq,
                 s->xs);
    return s->logits;
}
