/* A machine's crash, for one server process: LD_PRELOADed into valkey-server, it keeps what the
 * server writes to its append-only files (names ending in ".aof") in memory until the server
 * fsyncs them, as the page cache does until the disk has them. A SIGKILL then loses every write
 * not yet fsynced, as a power cut or a kernel panic does; a write the server fsynced is on disk.
 *
 * Only the calls valkey-server makes for its append-only file are taken: open64 (to learn which
 * descriptors are such files), write, fsync, fdatasync, close. A close writes what is kept (a
 * closed file is no longer the server's to lose in this model). Threads share the table under
 * one mutex: the main thread writes, a background thread fsyncs.
 *
 * Built by tests/common/server.rs with `cc -shared -fPIC`. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_FD 4096

struct kept {
    int aof;
    char *data;
    size_t len, cap;
};

static struct kept files[MAX_FD];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int (*real_open64)(const char *, int, ...);
static ssize_t (*real_write)(int, const void *, size_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_close)(int);

static void resolve(void) {
    if (!real_write) {
        real_open64 = dlsym(RTLD_NEXT, "open64");
        real_write = dlsym(RTLD_NEXT, "write");
        real_fsync = dlsym(RTLD_NEXT, "fsync");
        real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
        real_close = dlsym(RTLD_NEXT, "close");
    }
}

static int is_aof(const char *path) {
    size_t n = strlen(path);
    return n > 4 && strcmp(path + n - 4, ".aof") == 0;
}

/* Write out what `fd` keeps; the caller holds the lock. */
static int flush_kept(int fd) {
    struct kept *k = &files[fd];
    size_t done = 0;
    while (done < k->len) {
        ssize_t n = real_write(fd, k->data + done, k->len - done);
        if (n < 0)
            return -1;
        done += (size_t)n;
    }
    k->len = 0;
    return 0;
}

int open64(const char *path, int flags, ...) {
    resolve();
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    int fd = real_open64(path, flags, mode);
    if (fd >= 0 && fd < MAX_FD) {
        pthread_mutex_lock(&lock);
        files[fd].aof = is_aof(path) && (flags & (O_WRONLY | O_RDWR));
        files[fd].len = 0;
        pthread_mutex_unlock(&lock);
    }
    return fd;
}

ssize_t write(int fd, const void *buf, size_t count) {
    resolve();
    if (fd < 0 || fd >= MAX_FD)
        return real_write(fd, buf, count);
    pthread_mutex_lock(&lock);
    struct kept *k = &files[fd];
    if (!k->aof) {
        pthread_mutex_unlock(&lock);
        return real_write(fd, buf, count);
    }
    if (k->len + count > k->cap) {
        size_t cap = (k->len + count) * 2;
        char *grown = realloc(k->data, cap);
        if (!grown) {
            pthread_mutex_unlock(&lock);
            return -1;
        }
        k->data = grown;
        k->cap = cap;
    }
    memcpy(k->data + k->len, buf, count);
    k->len += count;
    pthread_mutex_unlock(&lock);
    return (ssize_t)count;
}

static int synced(int fd, int (*sync)(int)) {
    resolve();
    if (fd >= 0 && fd < MAX_FD) {
        pthread_mutex_lock(&lock);
        int failed = files[fd].aof ? flush_kept(fd) : 0;
        pthread_mutex_unlock(&lock);
        if (failed)
            return -1;
    }
    return sync(fd);
}

int fsync(int fd) {
    resolve();
    return synced(fd, real_fsync);
}

int fdatasync(int fd) {
    resolve();
    return synced(fd, real_fdatasync);
}

int close(int fd) {
    resolve();
    if (fd >= 0 && fd < MAX_FD) {
        pthread_mutex_lock(&lock);
        if (files[fd].aof)
            flush_kept(fd);
        files[fd].aof = 0;
        files[fd].len = 0;
        pthread_mutex_unlock(&lock);
    }
    return real_close(fd);
}
