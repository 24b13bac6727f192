/* train.h: the trainer library: training a GPT-2 model from scratch, in three parts, each
 * with its own header (this one only gathers them for the program and the tests):
 *
 *   train_model.h     settings, parameters (llm.c's 16 tensors), activations, init,
 *                     the batched forward with dropout, the softmax + cross-entropy
 *   train_backward.h  the backward pass, layer by layer (trainer_backward)
 *   train_optim.h     schedule, clipping, AdamW; checkpoints and the optimizer state
 *                     (crash-safe saves, every field checked on resume)
 *
 * A step is trainer_forward, trainer_backward, trainer_update; train.c is the program
 * around them (flags, data, the loop). Every loop that runs on several threads splits
 * its work by the shapes alone, so a run gives the same bits for any thread count.
 * Read model.h and kernels.h first, then the three headers in the order above.
 */
#ifndef TRAIN_H
#define TRAIN_H

#include "train_model.h"      /* Trainer, TrainSettings, trainer_init, trainer_forward */
#include "train_backward.h"   /* trainer_backward */
#include "train_optim.h"      /* trainer_update, trainer_save, trainer_load */

#endif /* TRAIN_H */
