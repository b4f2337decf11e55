/* What the C tick loop (_tick.c) and Python agree on: the version of the tables' meaning, the slots of the
 * shared header, what mp_run returns, the channels' op codes, and the structures Python fills. This file is
 * the one place they are written: _tick.c includes it, and sampling/abi.py reads it when it is imported,
 * building the ctypes structures and the constants that native.py and ring.py use
 * (tests/test_tick_abi.py compiles a program against it and compares what C sees with ctypes, field by field).
 *
 * So that abi.py can read it, it holds only:
 *   #define MP_NAME value    an integer: digits, parentheses, -, +, * and <<;
 *   typedef struct { ... } mp_name;    fields of int32_t, int64_t, double, const char * (a string Python
 *                                      hands in), char * (a buffer), or a pointer to one of those or to a
 *                                      structure declared above it; no arrays, no bit fields, and no
 *                                      padding the compiler adds (declare it: int32_t pad);
 *   int64_t mp_name(mp_loop *L, double x);    a function: a result of int, void or a field's type, and
 *                                             arguments of a field's type or arrays of a scalar (int64_t out[6]).
 * Raise MP_ABI with any change of a field, an op or a slot: native.py refuses a library built for another. */
#ifndef MP_TICK_ABI_H
#define MP_TICK_ABI_H

#include <stdint.h>

#define MP_ABI 3

/* Slots of the shared header (ring.py): rows written, the epoch of the worker allowed to write, whether
 * SCHED_FIFO was granted, then failed reads per sensor. */
#define MP_HEADER_COUNT 0
#define MP_HEADER_EPOCH 1
#define MP_HEADER_REALTIME 2
#define MP_HEADER_ERRORS 3
/* Bytes of one channel's last error text (UTF-8, cut to fit, NUL-padded), after the ring. */
#define MP_TEXT_BYTES 120

/* What mp_run returns: stopped, a Python sensor is due (the row is pending), replaced by the watchdog. */
#define MP_STOPPED 0
#define MP_PYTHON 1
#define MP_REPLACED 2

/* mp_loop.reading when no read is in flight, and when the watchdog took it over. */
#define MP_READING_NONE (-1)
#define MP_READING_TAKEN (-2)

/* mp_channel.op, files.OPS: a; a*b; a-b; 100 * (1 - change of b / change of a), the busy share of
 * jiffies; a/b (b > 0). */
#define MP_OP_FIRST 0
#define MP_OP_TIMES 1
#define MP_OP_MINUS 2
#define MP_OP_BUSY 3
#define MP_OP_DIVIDE 4

/* The largest file read (kernel_file.MAX_FILE_BYTES): /proc/stat of a 4096-core machine is about 0.5 MiB. */
#define MP_MAX_FILE_BYTES (1 << 24)

/* size: the next read's length, doubled when a read fills it (kernel_file.KernelFile); failed: this read's errno,
 * or _tick.c's NOT_REGULAR or TOO_LARGE, else 0; why: its text's printf format, %s the reason
 * (kernel_file.file_error). */
typedef struct {
    const char *path;
    const char *why;
    int32_t fd;
    int32_t size;
    int32_t first_number;
    int32_t n_numbers;
    int32_t failed;
    int32_t pad;
} mp_file;

/* fields: 0 for the first number after the key, else a bit mask of the numbers after it to sum;
 * a value at or below floor (after scale) reads NaN; file: the file it is read from. */
typedef struct {
    const char *key;
    int32_t key_len;
    int32_t fields;
    double scale;
    double floor;
    double value;
    double prev;
    int32_t file;
    int32_t pad;
} mp_number;

/* op: MP_OP_*; a value outside [low, high] is a failed read worded by the printf format why, %g the value
 * (base.reading_range). */
typedef struct {
    const char *why;
    double low;
    double high;
    int32_t column;
    int32_t a;
    int32_t b;
    int32_t op;
} mp_channel;

typedef struct {
    int64_t every;          /* ticks between reads */
    int64_t due;            /* the tick it is next due */
    int32_t native;         /* read here from its files; else by Python */
    int32_t offloaded;      /* read in its own thread: Python looks at every wake-up */
    int32_t due_now;        /* out: a Python sensor due at this wake-up */
    int32_t first_file;
    int32_t n_files;
    int32_t first_channel;
    int32_t n_channels;
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
    int64_t *header;        /* the shared header: MP_HEADER_* slots */
    double *ring;
    int64_t capacity;
    int64_t width;
    int64_t budget_us;      /* SIGALRM armed this long while a row is filled; 0: none */
    int64_t reading;        /* the sensor whose read is in flight; MP_READING_NONE, MP_READING_TAKEN */
    double reading_since;   /* its start, seconds */
    double *row;            /* out: the pending row (a slot of the ring) */
    int32_t pending;        /* a row is filled and waits for Python, then to be published */
    int32_t n_sensors;
    mp_sensor *sensors;
    mp_file *files;
    mp_number *numbers;
    mp_channel *channels;
    char *texts;            /* the channels' last error texts, MP_TEXT_BYTES each from column 1 (shared) */
    char *buf;              /* this loop's read buffer, grown to the largest file (mp_free frees it) */
    int64_t buf_size;
} mp_loop;

/* The library's functions (_tick.c says what each does); abi.py gives ctypes their arguments and results. */
int mp_run(mp_loop *L);
int64_t mp_take_over(mp_loop *L, double budget_s);
int mp_read(mp_loop *L, int32_t i, double *row);
void mp_free(mp_loop *L);
void mp_abi(int64_t out[6]);

#endif
