// Entry points of the subcommands; each parses its own flags (argv[0] is the command name).
#pragma once

namespace hearth::cli {

int cmd_run(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_synth(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_perplexity(int argc, char** argv);
int cmd_calibrate(int argc, char** argv);
int cmd_quantize(int argc, char** argv);
int cmd_imatrix(int argc, char** argv);
int cmd_chat(int argc, char** argv);
int cmd_serve(int argc, char** argv);

}  // namespace hearth::cli
