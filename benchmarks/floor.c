/* The floor of sampling cost: the least a sampler can do for the same reads.
 *
 * benchmarks/sampler_cost.py builds this with the system C compiler and runs
 * it beside the Python sampler.  It sleeps with clock_nanosleep(TIMER_ABSTIME)
 * on an absolute CLOCK_MONOTONIC grid and, on each tick, reads every file
 * that is due with pread into a fixed buffer, parses its numbers and writes a
 * row (time, one value per file) into a ring.  A file is due every N ticks
 * (N from the sensor's own period), and it wakes only on ticks where a file is
 * due, as the sampler does.
 *
 *   floor PERIOD_NS SECONDS TIMES_OUT FIFO EVERY:KIND:PATH...
 *
 * KIND is "num" (the file's first number) or "sum" (the sum of every number
 * in it: /proc/stat, /proc/meminfo).  Prints one line of JSON (ticks, rows,
 * nanoseconds spent reading, parsing and storing) and writes the rows' times
 * (float64 seconds) to TIMES_OUT.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES 64
#define BUF 65536

struct file { int fd; long every; int sum; };

/* Whether any file is due on this tick. */
static int due(const struct file *files, int nfiles, long long tick) {
    for (int i = 0; i < nfiles; i++)
        if (tick % files[i].every == 0) return 1;
    return 0;
}

static double parse(const char *buf, ssize_t n, int sum) {
    double total = 0.0;
    const char *p = buf, *end = buf + n;
    while (p < end) {
        if (*p >= '0' && *p <= '9') {
            char *next;
            unsigned long long v = strtoull(p, &next, 10);
            if (!sum) return (double)v;
            total += (double)v;
            p = next;
        } else {
            p++;
        }
    }
    return sum ? total : -1.0;
}

static long long ns(const struct timespec *t) { return t->tv_sec * 1000000000LL + t->tv_nsec; }

int main(int argc, char **argv) {
    if (argc < 5 || argc - 5 > MAX_FILES) {
        fprintf(stderr, "usage: floor PERIOD_NS SECONDS TIMES_OUT FIFO EVERY:KIND:PATH...\n");
        return 2;
    }
    long long period = atoll(argv[1]);
    long long ticks = (long long)(atof(argv[2]) * 1e9 / period);
    int nfiles = argc - 5;
    struct file files[MAX_FILES];
    for (int i = 0; i < nfiles; i++) {
        char *spec = argv[5 + i], *kind = strchr(spec, ':'), *path = kind ? strchr(kind + 1, ':') : NULL;
        if (!path) { fprintf(stderr, "bad file spec %s\n", spec); return 2; }
        files[i].every = atol(spec);
        files[i].sum = strncmp(kind + 1, "sum", 3) == 0;
        files[i].fd = open(path + 1, O_RDONLY);
        if (files[i].fd < 0) { perror(path + 1); return 1; }
    }
    if (atoi(argv[4])) {
        struct sched_param param = { .sched_priority = 10 };
        if (sched_setscheduler(0, SCHED_FIFO, &param) != 0) perror("sched_setscheduler");
    }
    int width = 1 + nfiles;
    double *ring = calloc((size_t)ticks * width, sizeof(double));
    static char buf[BUF];
    long long rows = 0, work = 0;
    struct timespec next, now, done;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (long long tick = 0; tick < ticks; ) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        double *row = ring + rows * width;
        row[0] = ns(&now) * 1e-9;
        for (int i = 0; i < nfiles; i++) {
            row[1 + i] = -1.0;  /* not due this tick */
            if (tick % files[i].every == 0) {
                ssize_t n = pread(files[i].fd, buf, BUF, 0);
                row[1 + i] = n > 0 ? parse(buf, n, files[i].sum) : -1.0;
            }
        }
        rows++;
        clock_gettime(CLOCK_MONOTONIC, &done);
        work += ns(&done) - ns(&now);
        long long t = ns(&next) + period, late = ns(&done) - t;
        long long skip = late >= 0 ? late / period + 1 : 0;  /* overran: stay on the grid */
        tick += 1 + skip;
        t += skip * period;
        while (!due(files, nfiles, tick)) {  /* nothing to read: sleep on to the next tick with a file due */
            tick++;
            t += period;
        }
        next.tv_sec = t / 1000000000LL;
        next.tv_nsec = t % 1000000000LL;
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) != 0) {}
    }
    FILE *out = fopen(argv[3], "wb");
    if (!out) { perror(argv[3]); return 1; }
    for (long long r = 0; r < rows; r++) fwrite(ring + r * width, sizeof(double), 1, out);
    fclose(out);
    printf("{\"ticks\": %lld, \"rows\": %lld, \"work_ns\": %lld}\n", ticks, rows, work);
    return 0;
}
