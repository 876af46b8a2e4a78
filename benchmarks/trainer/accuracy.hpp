#pragma once
// trainer_vs_pytorch --accuracy (accuracy.cpp): both sides train for an epoch (or N iterations) per
// model and seed and are tested on the whole test set; the raw results go into a folder.

namespace gradsync::trainer::bench {

/// The accuracy mode's main: argv as trainer_vs_pytorch's (argv[1] is "--accuracy").
int accuracy_main(int argc, char** argv);

}  // namespace gradsync::trainer::bench
