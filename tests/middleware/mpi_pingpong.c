/* tests/middleware/mpi_pingpong.c: a small MPI program for two ranks (or
 * more for the Allreduce; the ping-pong runs between ranks 0 and 1), built
 * with mpicc by tests/middleware/ucx_mpi.py and run under Open MPI on uroce
 * (pml ucx) and on kernel TCP (pml ob1, btl tcp).
 *
 * For each size it runs a ping-pong (half round-trip latency, median of the
 * iterations) and a one-way stream (bandwidth, the receiver answers once at
 * the end); every message carries a pattern of its size and iteration that
 * the receiver checks in full. Then MPI_Allreduce (MPI_SUM of a vector of
 * doubles whose sum is known in closed form) on every rank, checked exactly.
 *
 * Output, rank 0, one line per size and one for the Allreduce:
 *   pingpong size=N iters=I lat_us=X bw_MBps=Y
 *   allreduce n=N ok=1
 * and "mpi_pingpong: done, E errors"; the exit status is 0 only with no
 * error. Usage: mpi_pingpong [SIZES] [ITERS] [--stall S]
 *   SIZES  comma-separated message sizes in bytes (default 64,4096,65536,1048576)
 *   ITERS  ping-pong round trips and streamed messages per size (default
 *          1000), fewer where that would pass 64 MiB a size
 *   --stall S  rank 1 prints its pid and sleeps S seconds in the middle of
 *          the first size's stream, so that a test can kill it while rank 0
 *          waits. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int errors;

static unsigned char pattern(long iter, long i) { return (unsigned char)(iter * 131 + i * 7 + 1); }

static void fill(unsigned char* buf, long size, long iter) {
  for (long i = 0; i < size; ++i) buf[i] = pattern(iter, i);
}

static void verify(const unsigned char* buf, long size, long iter, const char* what) {
  for (long i = 0; i < size; ++i) {
    if (buf[i] != pattern(iter, i)) {
      if (errors++ < 5) fprintf(stderr, "%s: size %ld iter %ld byte %ld: 0x%02x, expected 0x%02x\n", what, size, iter, i, buf[i], pattern(iter, i));
      return;
    }
  }
}

static int cmp_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Half round trips between ranks 0 and 1; rank 0 returns the median in us. */
static double pingpong(int rank, unsigned char* buf, long size, long iters) {
  double* samples = malloc(sizeof(double) * (size_t)iters);
  const int peer = 1 - rank;
  for (long it = 0; it < iters; ++it) {
    if (rank == 0) {
      fill(buf, size, it);
      const double t0 = MPI_Wtime();
      MPI_Send(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
      MPI_Recv(buf, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      samples[it] = (MPI_Wtime() - t0) * 1e6 / 2;
      verify(buf, size, it + 1, "pingpong reply");
    } else {
      MPI_Recv(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      verify(buf, size, it, "pingpong request");
      fill(buf, size, it + 1);
      MPI_Send(buf, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
    }
  }
  qsort(samples, (size_t)iters, sizeof(double), cmp_double);
  const double median = samples[iters / 2];
  free(samples);
  return median;
}

/* Rank 0 streams `msgs` messages to rank 1, which checks each and answers
 * once at the end; rank 0 returns MB/s (10^6 bytes a second). */
static double stream(int rank, unsigned char* buf, long size, long msgs, int stall) {
  const int peer = 1 - rank;
  char ack = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (long it = 0; it < msgs; ++it) {
    if (rank == 0) {
      fill(buf, size, it);
      MPI_Send(buf, (int)size, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
    } else {
      if (stall && it == msgs / 2) {
        printf("mpi_pingpong: rank %d pid %d stalls %d s\n", rank, (int)getpid(), stall);
        fflush(stdout);
        sleep((unsigned)stall);
      }
      MPI_Recv(buf, (int)size, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      verify(buf, size, it, "stream");
    }
  }
  if (rank == 0) {
    MPI_Recv(&ack, 1, MPI_CHAR, peer, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else {
    MPI_Send(&ack, 1, MPI_CHAR, peer, 4, MPI_COMM_WORLD);
  }
  return (double)size * (double)msgs / (MPI_Wtime() - t0) / 1e6;
}

/* Rank r contributes v[i] = r * n + i; the sum over R ranks is
 * R * i + n * R (R - 1) / 2, exact in doubles for these sizes. */
static void allreduce(int rank, int ranks, long n) {
  double* v = malloc(sizeof(double) * (size_t)n);
  double* sum = malloc(sizeof(double) * (size_t)n);
  for (long i = 0; i < n; ++i) v[i] = (double)rank * (double)n + (double)i;
  MPI_Allreduce(v, sum, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  int ok = 1;
  for (long i = 0; i < n; ++i) {
    const double want = (double)ranks * (double)i + (double)n * ranks * (ranks - 1) / 2;
    if (sum[i] != want) {
      if (errors++ < 5) fprintf(stderr, "allreduce: rank %d element %ld: %.1f, expected %.1f\n", rank, i, sum[i], want);
      ok = 0;
      break;
    }
  }
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (rank == 0) printf("allreduce n=%ld ranks=%d ok=%d\n", n, ranks, all_ok);
  if (!all_ok && ok) ++errors;
  free(v);
  free(sum);
}

int main(int argc, char** argv) {
  const char* sizes = "64,4096,65536,1048576";
  long iters = 1000;
  int stall = 0, positional = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--help")) {
      printf("usage: mpi_pingpong [SIZES] [ITERS] [--stall S]\n"
             "  SIZES      comma-separated message sizes in bytes (default 64,4096,65536,1048576)\n"
             "  ITERS      round trips and streamed messages per size (default 1000; fewer past 64 MiB a size)\n"
             "  --stall S  rank 1 prints its pid and sleeps S seconds mid-stream (default 0: no stall)\n");
      return 0;
    } else if (!strcmp(argv[i], "--stall") && i + 1 < argc) {
      stall = atoi(argv[++i]);
    } else if (positional == 0) {
      sizes = argv[i];
      ++positional;
    } else if (positional == 1) {
      iters = atol(argv[i]);
      ++positional;
    } else {
      fprintf(stderr, "mpi_pingpong: unexpected argument '%s' (--help)\n", argv[i]);
      return 2;
    }
  }
  if (iters < 1 || stall < 0) {
    fprintf(stderr, "mpi_pingpong: ITERS must be at least 1 and S at least 0 (--help)\n");
    return 2;
  }
  MPI_Init(&argc, &argv);
  int rank, ranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks < 2) {
    if (rank == 0) fprintf(stderr, "mpi_pingpong: needs 2 ranks or more\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  char* list = strdup(sizes);
  int first = 1;
  for (char* tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    char* end;
    const long size = strtol(tok, &end, 10);
    if (*end || size < 1 || size > (1L << 30)) {
      if (rank == 0) fprintf(stderr, "mpi_pingpong: bad size '%s' (1..2^30 bytes)\n", tok);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    unsigned char* buf = malloc((size_t)size);
    if (rank < 2) {
      long msgs = iters;
      if (msgs * size > (64L << 20)) msgs = (64L << 20) / size > 0 ? (64L << 20) / size : 1;
      const double bw = stream(rank, buf, size, msgs, first ? stall : 0);
      const double lat = pingpong(rank, buf, size, msgs);
      if (rank == 0) printf("pingpong size=%ld iters=%ld lat_us=%.2f bw_MBps=%.1f\n", size, msgs, lat, bw);
    } else {
      MPI_Barrier(MPI_COMM_WORLD);  /* stream()'s */
    }
    fflush(stdout);
    free(buf);
    first = 0;
  }
  free(list);
  allreduce(rank, ranks, 1 << 16);
  int total = 0;
  MPI_Reduce(&errors, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("mpi_pingpong: done, %d errors\n", total);
  MPI_Finalize();
  return total ? 1 : 0;
}
