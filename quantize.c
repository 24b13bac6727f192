/* quantize.c: write the int8 form of a checkpoint (the third program).
 *
 * Loads any checkpoint run can load (checkpoint.c validates it), then writes every weight
 * matrix as int8 with one fp32 scale per group of GS values along each row: GPT-2 models
 * as llm.c's header with version 80, Llama models as llama2.c's version 2 (which
 * llama2.c's runq also reads when GS divides the model's widths). Norms, biases and
 * position embeddings stay fp32. run then multiplies in int8 (kernels_matmul_q8).
 */
#include <stdio.h>        /* fprintf, printf */
#include <stdlib.h>       /* EXIT_SUCCESS */
#include <string.h>       /* strcmp */

#include "checkpoint.h"   /* checkpoint_load, checkpoint_save_q8 */
#include "cli.h"          /* cli_parse_int */
#include "quant.h"        /* QUANT_GROUP_MAX */

enum { EXIT_BAD_DATA = 1, EXIT_USAGE = 2 };

static void usage(FILE *f) {
    fprintf(f, "Usage: quantize IN.bin OUT.bin [-g GS]\n"
               "Write the int8 form of the checkpoint IN.bin (any format run loads) to OUT.bin:\n"
               "every matrix as int8 values with one fp32 scale per GS values along each row\n"
               "(default %d; the last group of a row may be shorter), norms and biases fp32.\n"
               "  -g, --group GS   values per scale, 1..%d\n"
               "  -h, --help       print this help and exit\n",
            CHECKPOINT_Q8_GROUP, QUANT_GROUP_MAX);
}

int main(int argc, char **argv) {
    const char *paths[2] = {NULL, NULL};
    int n_paths = 0, group = CHECKPOINT_Q8_GROUP;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return EXIT_SUCCESS;
        } else if (!strcmp(argv[i], "-g") || !strcmp(argv[i], "--group")) {
            if (i + 1 == argc || cli_parse_int(argv[i + 1], 1, QUANT_GROUP_MAX, &group) != 0) {
                fprintf(stderr, "quantize: %s needs an integer 1..%d (got %s)\n", argv[i],
                        QUANT_GROUP_MAX, i + 1 == argc ? "nothing" : argv[i + 1]);
                fprintf(stderr, "Try 'quantize --help'.\n");
                return EXIT_USAGE;
            }
            i++;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "quantize: unknown option %s\nTry 'quantize --help'.\n", argv[i]);
            return EXIT_USAGE;
        } else if (n_paths < 2) {
            paths[n_paths++] = argv[i];
        } else {
            fprintf(stderr, "quantize: too many arguments (got %s after IN and OUT)\n"
                    "Try 'quantize --help'.\n", argv[i]);
            return EXIT_USAGE;
        }
    }
    if (n_paths != 2) {
        fprintf(stderr, "quantize: expected IN.bin and OUT.bin (got %d paths)\n"
                "Try 'quantize --help'.\n", n_paths);
        return EXIT_USAGE;
    }
    Checkpoint ck;
    if (checkpoint_load(&ck, paths[0]) != 0) return EXIT_BAD_DATA;
    int status = checkpoint_save_q8(&ck, paths[1], group);
    if (status == 0)
        fprintf(stderr, "quantize: %s (%s) -> %s: int8, groups of %d\n", paths[0], ck.format,
                paths[1], group);
    checkpoint_free(&ck);
    return status == 0 ? EXIT_SUCCESS : EXIT_BAD_DATA;
}
