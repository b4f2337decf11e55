/* The sampler process's tick loop in C: it wakes only on ticks where a sensor
 * is due, reads the sensors declared as kernel files (sensors/files.py) with
 * pread into one buffer, and writes each row in place in the shared ring.
 *
 * Why: a tick of the same loop in Python costs about three times the CPU of
 * the same wake-ups and reads in C (benchmarks/sampler_cost.py), and on a
 * saturated board every microsecond the sampler runs is taken from training.
 * Sensors declared as files are INA3221 rails, CPU utilization and clocks
 * (/proc/stat deltas), memory, GPU load, EMC and thermal zones. The others
 * (RAPL's wrapping counters, throttle events, NVML, jtop, replays) stay in
 * Python: mp_run returns MP_PYTHON with the row pending when
 * one of them is due, Python reads them into the row, and the next mp_run
 * publishes it. native.py loads this library with ctypes (no Python headers
 * are needed to build it); without it, loop.py runs the same schedule in
 * Python.
 *
 * Only C99, POSIX and GCC's __atomic builtins: it builds with the gcc of a
 * JetPack image.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* Slots of the shared header (ring.py). */
#define HEADER_COUNT 0
#define HEADER_EPOCH 1
#define HEADER_ERRORS 3

enum { MP_STOPPED = 0, MP_PYTHON = 1, MP_REPLACED = 2 };
#define READING_NONE (-1)
#define READING_TAKEN (-2)

typedef struct { const char *path; int32_t fd; int32_t size; int32_t first_number; int32_t n_numbers; } mp_file;
/* fields: 0 for the first number after the key, else a bit mask of the numbers after it to sum;
 * a value at or below floor (after scale) reads NaN. */
typedef struct {
    const char *key; int32_t key_len; int32_t fields; double scale; double floor; double value; double prev;
} mp_number;
/* op: 0 a, 1 a*b, 2 a-b, 3 100 * (1 - change of b / change of a): the busy share of jiffies, 4 a/b (b > 0) */
typedef struct { int32_t column; int32_t a; int32_t b; int32_t op; } mp_channel;

typedef struct {
    int64_t every;          /* ticks between reads */
    int64_t due;            /* the tick it is next due */
    int32_t native;         /* read here from its files; else by Python */
    int32_t offloaded;      /* read in its own thread: Python looks at every wake-up */
    int32_t due_now;        /* out: a Python sensor due at this wake-up */
    int32_t first_file, n_files, first_channel, n_channels;
    int32_t pad;
} mp_sensor;

typedef struct {
    int64_t period_ns;      /* the grid: origin_ns + tick * period_ns on CLOCK_MONOTONIC */
    int64_t origin_ns;
    int64_t stride;         /* ticks between wake-ups: the fastest sensor's */
    int64_t tick;           /* the tick of the row being filled */
    int64_t epoch;          /* this worker's epoch: writes stop when the header's changes */
    int64_t generation;     /* this leader's generation */
    int64_t *leader;        /* the current leader's generation (the watchdog's) */
    int64_t *header;        /* the shared header: count, epoch, realtime, errors per sensor */
    double *ring;
    int64_t capacity, width;
    int64_t budget_us;      /* SIGALRM armed this long while a row is filled; 0: none */
    int64_t reading;        /* the sensor whose read is in flight; READING_NONE, READING_TAKEN */
    double reading_since;   /* its start, seconds */
    double *row;            /* out: the pending row (a slot of the ring) */
    int32_t pending;        /* a row is filled and waits for Python, then to be published */
    int32_t n_sensors;
    mp_sensor *sensors;
    mp_file *files;
    mp_number *numbers;
    mp_channel *channels;
    char *buf;
    int64_t buf_size;
} mp_loop;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void arm(int64_t us) {
    struct itimerval v = { { 0, 0 }, { (time_t)(us / 1000000), (suseconds_t)(us % 1000000) } };
    setitimer(ITIMER_REAL, &v, NULL);
}

static int blank(char c) { return c == ' ' || c == '\t' || c == '\n'; }

/* The number after key (which must start a line), or the first number; with fields, the sum of the numbers
 * after key whose bits are set; NaN if one is missing (files.parse_number). */
static double parse(const char *text, ssize_t n, const char *key, int32_t key_len, int32_t fields) {
    const char *p = text, *end = text + n;
    if (key_len > 0) {
        p = memmem(text, (size_t)n, key, (size_t)key_len);
        if (p == NULL || (p > text && p[-1] != '\n')) return NAN;
        p += key_len;
    }
    double sum = 0.0;
    for (int k = 0; k < 31; k++) {
        if (fields == 0 && k > 0) break;
        if (fields != 0 && (fields >> k) == 0) break;
        while (p < end && (*p == ' ' || *p == '\t' || (key_len == 0 && *p == '\n'))) p++;
        if (p >= end || *p == '\n') return NAN;
        char *stop;
        double v = strtod(p, &stop);
        if (stop == p || (stop < end && !blank(*stop))) return NAN;
        if (fields == 0 || (fields >> k) & 1) sum += v;
        p = stop;
    }
    return sum;
}

static void read_file(mp_loop *L, mp_file *f) {
    ssize_t n = -1;
    if (f->fd < 0) f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (f->fd >= 0) {
        int64_t size = f->size < L->buf_size ? f->size : L->buf_size - 1;
        n = pread(f->fd, L->buf, (size_t)size, 0);
        if (n < 0) { close(f->fd); f->fd = -1; } /* opened again on the next read */
    }
    for (int32_t k = 0; k < f->n_numbers; k++) {
        mp_number *num = &L->numbers[f->first_number + k];
        num->prev = num->value;
        double v = n > 0 ? parse(L->buf, n, num->key, num->key_len, num->fields) * num->scale : NAN;
        num->value = v > num->floor ? v : NAN;
    }
}

/* Reads sensor i's files into the row; 0 if the watchdog took the read over meanwhile. */
static int read_native(mp_loop *L, int i) {
    mp_sensor *s = &L->sensors[i];
    L->reading_since = now_s(); /* published by the store of reading that follows */
    __atomic_store_n(&L->reading, (int64_t)i, __ATOMIC_SEQ_CST);
    for (int32_t f = 0; f < s->n_files; f++) read_file(L, &L->files[s->first_file + f]);
    int64_t expected = i;
    if (!__atomic_compare_exchange_n(&L->reading, &expected, READING_NONE, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        return 0;
    for (int32_t c = 0; c < s->n_channels; c++) {
        mp_channel *ch = &L->channels[s->first_channel + c];
        double v = L->numbers[ch->a].value;
        mp_number *b = ch->b >= 0 ? &L->numbers[ch->b] : NULL;
        if (ch->op == 1) v *= b->value;
        else if (ch->op == 2) v -= b->value;
        else if (ch->op == 3) {
            double total = v - L->numbers[ch->a].prev, idle = b->value - b->prev;
            v = total > 0 ? 100.0 * (total - idle) / total : NAN; /* NaN compares false: no share yet */
        } else if (ch->op == 4) v = b->value > 0 ? v / b->value : NAN;
        L->row[ch->column] = v;
    }
    return 1;
}

static int alive(mp_loop *L) {
    return __atomic_load_n(&L->header[HEADER_EPOCH], __ATOMIC_ACQUIRE) == L->epoch
        && __atomic_load_n(L->leader, __ATOMIC_ACQUIRE) == L->generation;
}

/* Publishes the pending row: the reader sees rows up to the count. */
static int publish(mp_loop *L) {
    L->pending = 0;
    if (!alive(L)) return 0;
    int64_t count = __atomic_load_n(&L->header[HEADER_COUNT], __ATOMIC_RELAXED);
    __atomic_store_n(&L->header[HEADER_COUNT], count + 1, __ATOMIC_RELEASE);
    return 1;
}

/* Sleeps until the next wake-up's tick on the grid, skipping ticks already past. */
static void sleep_to_next(mp_loop *L) {
    int64_t next = L->tick + L->stride;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t now_ns = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec;
    int64_t at = L->origin_ns + next * L->period_ns;
    if (at <= now_ns) { /* overran: stay on the grid */
        int64_t late = (now_ns - at) / (L->stride * L->period_ns) + 1;
        next += late * L->stride;
        at += late * L->stride * L->period_ns;
    }
    L->tick = next;
    struct timespec t = { (time_t)(at / 1000000000LL), (long)(at % 1000000000LL) };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR) {}
}

/* Fills the row of this tick: its time, NaN, and every due native sensor; marks the Python ones due. */
static int fill_row(mp_loop *L, int *python) {
    int64_t count = __atomic_load_n(&L->header[HEADER_COUNT], __ATOMIC_RELAXED);
    L->row = L->ring + (count % L->capacity) * L->width;
    L->row[0] = now_s();
    for (int64_t c = 1; c < L->width; c++) L->row[c] = NAN;
    L->pending = 1;
    if (L->budget_us > 0) arm(L->budget_us);
    *python = 0;
    for (int i = 0; i < L->n_sensors; i++) {
        mp_sensor *s = &L->sensors[i];
        int due = L->tick >= s->due;
        if (due) s->due = L->tick - (L->tick - s->due) % s->every + s->every; /* on its own grid */
        s->due_now = due && (!s->native || s->offloaded); /* an offloaded file sensor is read by its thread */
        if (s->offloaded || s->due_now) *python = 1;
        else if (due && !read_native(L, i)) return 0;
    }
    return 1;
}

/* Runs until stopped (MP_STOPPED), replaced by the watchdog (MP_REPLACED), or a Python sensor is due
 * (MP_PYTHON: the row is pending; call again to publish it and go on). */
int mp_run(mp_loop *L) {
    for (;;) {
        if (L->pending) {
            if (L->budget_us > 0) arm(0);
            if (!publish(L)) return MP_STOPPED;
            sleep_to_next(L);
        }
        if (!alive(L)) return MP_STOPPED;
        int python;
        if (!fill_row(L, &python)) return MP_REPLACED;
        if (python) return MP_PYTHON;
    }
}

/* The watchdog's side: takes over a native read in flight for longer than budget_s and returns its sensor;
 * -1 when no read is in flight, else minus 2 and the microseconds the read has left. */
int64_t mp_take_over(mp_loop *L, double budget_s) {
    int64_t i = __atomic_load_n(&L->reading, __ATOMIC_SEQ_CST);
    if (i < 0) return -1;
    double left = L->reading_since + budget_s - now_s();
    if (left >= 0) return -2 - (int64_t)(left * 1e6);
    return __atomic_compare_exchange_n(&L->reading, &i, READING_TAKEN, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST) ? i : -1;
}

/* What native.py checks before it uses this build: the version of the tables' meaning (raise it with
 * any change of an op or a field) and the sizes of the structures. */
#define MP_ABI 2
void mp_abi(int64_t out[6]) {
    out[0] = MP_ABI; out[1] = sizeof(mp_loop); out[2] = sizeof(mp_sensor); out[3] = sizeof(mp_file);
    out[4] = sizeof(mp_number); out[5] = sizeof(mp_channel);
}
