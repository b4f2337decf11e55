/* The sampler process's tick loop in C: it wakes only on ticks where a sensor
 * is due, reads the sensors declared as kernel files (sensors/files.py) with
 * pread into one buffer, and writes each row in place in the shared ring.
 * What it reads is what the Python loop reads, to the bit: the same number
 * grammar on the bytes read (never past them), the same arithmetic, a file
 * that is not regular or cannot be read failing its own channels with the
 * same words, a value out of its kind's range (base.reading_range) a failed
 * read; tests/test_tick_parity.py feeds both loops the same generated files.
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
 * Only C99, POSIX (with glibc's and musl's strtod_l) and GCC's builtins and
 * attributes: it builds with the gcc of a JetPack image.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "_tick_abi.h" /* the structures and constants Python shares: sampling/abi.py reads the same file */

/* Why a file failed, besides an errno (kernel_file.NOT_REGULAR, kernel_file.TOO_LARGE): mp_file.failed. */
#define NOT_REGULAR (-1)
#define TOO_LARGE (-2)

static locale_t c_locale; /* strtod's: "." is the decimal point whatever the process's locale, as in float() */

__attribute__((constructor)) static void init_locale(void) { c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void arm(int64_t us) {
    struct itimerval v = { { 0, 0 }, { (time_t)(us / 1000000), (suseconds_t)(us % 1000000) } };
    setitimer(ITIMER_REAL, &v, NULL);
}

/* ASCII whitespace, where Python's bytes.split() splits. */
static int space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static const char *digits(const char *p, const char *end) {
    while (p < end && *p >= '0' && *p <= '9') p++;
    return p;
}

/* Where files.NUMBER at p ends ([+-], digits with an optional point, or a point and digits, then an optional
 * exponent), or p if none starts there. */
static const char *number_end(const char *p, const char *end) {
    const char *q = p < end && (*p == '+' || *p == '-') ? p + 1 : p;
    const char *whole = digits(q, end), *r = whole;
    if (r < end && *r == '.') r = digits(r + 1, end);
    if (whole == q && r - whole < 2) return p; /* a digit before the point, or after it */
    if (r < end && (*r == 'e' || *r == 'E')) {
        const char *e = r + 1 < end && (r[1] == '+' || r[1] == '-') ? r + 2 : r + 1;
        const char *exponent = digits(e, end);
        if (exponent > e) r = exponent;
    }
    return r;
}

/* files.parse_number on the n bytes at text, which the buffer NUL-terminates: the number after key at the
 * start of a line, or the first number; with fields, the sum of the numbers of the line after key whose bits
 * are set; NaN if one is missing or not a whole word of files.NUMBER. */
static double parse(const char *text, ssize_t n, const char *key, int32_t key_len, int32_t fields) {
    const char *p = text, *end = text + n;
    if (key_len > 0) {
        for (;; p++) { /* the first line that starts with key */
            p = memmem(p, (size_t)(end - p), key, (size_t)key_len);
            if (p == NULL) return NAN;
            if (p == text || p[-1] == '\n') break;
        }
        p += key_len;
    }
    uint32_t wanted = fields != 0 ? (uint32_t)fields : 1u;
    double sum = 0.0;
    for (int k = 0; k < 32 && wanted >> k != 0; k++) {
        while (p < end && space(*p) && (key_len == 0 || *p != '\n')) p++; /* a key's numbers are on its line */
        if (p == end || *p == '\n') return NAN;
        const char *word = p;
        while (p < end && !space(*p)) p++;
        if (wanted >> k & 1u) {
            if (number_end(word, p) != p) return NAN;
            sum += strtod_l(word, NULL, c_locale); /* it stops at the space or NUL after the word */
        }
    }
    return sum;
}

static ssize_t failed(mp_file *f, int why) {
    if (f->fd >= 0) { close(f->fd); f->fd = -1; } /* opened again on the next read */
    f->failed = why;
    return -1;
}

/* Reads f whole into the buffer, NUL-terminated; its length, or -1 with f->failed set. It is opened so that
 * it cannot block, and must be a regular file (sysfs and procfs files are; a FIFO would block the loop). */
static ssize_t read_whole(mp_loop *L, mp_file *f) {
    if (f->fd < 0) {
        struct stat st;
        f->fd = open(f->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (f->fd < 0) return failed(f, errno);
        if (fstat(f->fd, &st) != 0) return failed(f, errno);
        if (!S_ISREG(st.st_mode)) return failed(f, NOT_REGULAR);
    }
    for (;;) {
        int32_t size = f->size;
        if (size + 1 > L->buf_size) {
            char *grown = realloc(L->buf, (size_t)size + 1);
            if (grown == NULL) return failed(f, ENOMEM);
            L->buf = grown;
            L->buf_size = size + 1;
        }
        ssize_t n = pread(f->fd, L->buf, (size_t)size, 0);
        if (n < 0) return failed(f, errno);
        if (n < size) {
            L->buf[n] = '\0';
            f->failed = 0;
            return n;
        }
        if (size >= MP_MAX_FILE_BYTES) return failed(f, TOO_LARGE);
        f->size = size * 2; /* it may hold more: read it again with room to spare */
    }
}

static void read_file(mp_loop *L, mp_file *f) {
    ssize_t n = read_whole(L, f);
    for (int32_t k = 0; k < f->n_numbers; k++) {
        mp_number *num = &L->numbers[f->first_number + k];
        num->prev = num->value;
        double v = n >= 0 ? parse(L->buf, n, num->key, num->key_len, num->fields) * num->scale : NAN;
        num->value = v > num->floor ? v : NAN;
    }
}

/* Keeps text as the last error of the channel in column (as ring.SharedRing.set_text: cut, NUL-padded). */
static void set_text(mp_loop *L, int32_t column, const char *text) {
    char padded[MP_TEXT_BYTES] = { 0 };
    memcpy(padded, text, strnlen(text, MP_TEXT_BYTES));
    char *slot = L->texts + (int64_t)(column - 1) * MP_TEXT_BYTES;
    if (memcmp(slot, padded, MP_TEXT_BYTES) != 0) memcpy(slot, padded, MP_TEXT_BYTES); /* written once while it lasts */
}

static const char *reason(int why) {
    return why == NOT_REGULAR ? "not a regular file" : why == TOO_LARGE ? "larger than 16 MiB" : strerror(why);
}

/* A channel's value, or NaN and 1 with its text kept when its file failed or the value is out of range. */
static int check(mp_loop *L, mp_channel *ch, double *v) {
    char text[MP_TEXT_BYTES + 1];
    mp_file *a = &L->files[L->numbers[ch->a].file];
    mp_file *b = ch->b >= 0 ? &L->files[L->numbers[ch->b].file] : NULL;
    mp_file *bad = a->failed ? a : b != NULL && b->failed ? b : NULL;
    if (bad != NULL) snprintf(text, sizeof text, bad->why, reason(bad->failed));
    else if (*v < ch->low || *v > ch->high) snprintf(text, sizeof text, ch->why, *v);
    else return 0;
    set_text(L, ch->column, text);
    *v = NAN;
    return 1;
}

/* Reads sensor i's files into the row; 0 if the watchdog took the read over meanwhile. */
static int read_native(mp_loop *L, int i) {
    mp_sensor *s = &L->sensors[i];
    L->reading_since = now_s(); /* published by the store of reading that follows */
    __atomic_store_n(&L->reading, (int64_t)i, __ATOMIC_SEQ_CST);
    for (int32_t f = 0; f < s->n_files; f++) read_file(L, &L->files[s->first_file + f]);
    int64_t expected = i;
    if (!__atomic_compare_exchange_n(&L->reading, &expected, MP_READING_NONE, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        return 0;
    int bad = 0;
    for (int32_t c = 0; c < s->n_channels; c++) {
        mp_channel *ch = &L->channels[s->first_channel + c];
        double v = L->numbers[ch->a].value;
        mp_number *b = ch->b >= 0 ? &L->numbers[ch->b] : NULL;
        if (ch->op == MP_OP_TIMES) v *= b->value;
        else if (ch->op == MP_OP_MINUS) v -= b->value;
        else if (ch->op == MP_OP_BUSY) {
            double total = v - L->numbers[ch->a].prev, idle = b->value - b->prev;
            v = total > 0 ? 100.0 * (total - idle) / total : NAN; /* NaN compares false: no share yet */
        } else if (ch->op == MP_OP_DIVIDE) v = b->value > 0 ? v / b->value : NAN;
        bad |= check(L, ch, &v);
        L->row[ch->column] = v;
    }
    if (bad) __atomic_add_fetch(&L->header[MP_HEADER_ERRORS + i], 1, __ATOMIC_RELAXED); /* one failed read */
    return 1;
}

static int alive(mp_loop *L) {
    return __atomic_load_n(&L->header[MP_HEADER_EPOCH], __ATOMIC_ACQUIRE) == L->epoch
        && __atomic_load_n(L->leader, __ATOMIC_ACQUIRE) == L->generation;
}

/* Publishes the pending row: the reader sees rows up to the count. */
static int publish(mp_loop *L) {
    L->pending = 0;
    if (!alive(L)) return 0;
    int64_t count = __atomic_load_n(&L->header[MP_HEADER_COUNT], __ATOMIC_RELAXED);
    __atomic_store_n(&L->header[MP_HEADER_COUNT], count + 1, __ATOMIC_RELEASE);
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
    int64_t count = __atomic_load_n(&L->header[MP_HEADER_COUNT], __ATOMIC_RELAXED);
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
    return __atomic_compare_exchange_n(&L->reading, &i, MP_READING_TAKEN, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST) ? i : -1;
}

/* One read of sensor i into row, as a tick reads it: how the tests compare this loop with Python's. */
int mp_read(mp_loop *L, int32_t i, double *row) {
    L->row = row;
    return read_native(L, i);
}

/* Frees the loop's read buffer, once its thread is out of mp_run. */
void mp_free(mp_loop *L) {
    free(L->buf);
    L->buf = NULL;
    L->buf_size = 0;
}

/* What native.py checks before it uses this build: the version of the tables' meaning (MP_ABI) and the
 * sizes of the structures. */
void mp_abi(int64_t out[6]) {
    out[0] = MP_ABI; out[1] = sizeof(mp_loop); out[2] = sizeof(mp_sensor); out[3] = sizeof(mp_file);
    out[4] = sizeof(mp_number); out[5] = sizeof(mp_channel);
}
