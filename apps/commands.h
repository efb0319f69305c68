// Subcommands of the `uroce` front end. Each takes the arguments after its
// own name (argv[0] is the subcommand name) and returns the process exit code.
#pragma once

namespace uroce::apps {

int cmd_bench_mc(int argc, char** argv);
int cmd_compare(int argc, char** argv);
int cmd_conform(int argc, char** argv);
int cmd_demo(int argc, char** argv);
int cmd_dump(int argc, char** argv);
int cmd_floor(int argc, char** argv);
int cmd_perf(int argc, char** argv);
int cmd_pingpong(int argc, char** argv);
int cmd_qperf(int argc, char** argv);
int cmd_rping(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_ucmatose(int argc, char** argv);
int cmd_udaddy(int argc, char** argv);
int cmd_sim(int argc, char** argv);
int cmd_stat(int argc, char** argv);

}  // namespace uroce::apps
