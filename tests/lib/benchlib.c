/*
 * benchlib.c - see benchlib.h.
 */
#define _GNU_SOURCE
#include "benchlib.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define E2E_NO_CMOCKA /* e2e_read_port, e2e_exit_status */
#include "e2e.h"
#include "mq.h"

/* ======================================================================
 * Run control, settings, scratch directory, header
 * ====================================================================== */

volatile sig_atomic_t bench_interrupted;

static void on_signal(int sig) {
    (void)sig;
    bench_interrupted = 1;
}

void bench_catch_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

void bench_sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !bench_interrupted) {
    }
}

double bench_env_num(const char *name, double def, double min, double max) {
    const char *v = getenv(name);
    if (!v || !*v) return def;
    char *end = NULL;
    double d = strtod(v, &end);
    if (end == v || *end || d < min || d > max) {
        fprintf(stderr, "bench: ignoring %s='%s' (want %g..%g)\n", name, v, min, max);
        return def;
    }
    return d;
}

bool bench_wanted(const char *group) {
    const char *only = getenv("BENCH_ONLY");
    return !only || !*only || strstr(only, group) != NULL;
}

bool bench_wanted_word(const char *group) {
    const char *only = getenv("BENCH_ONLY");
    if (!only || !*only) return true;
    size_t n = strlen(group);
    for (const char *p = only; *p;) {
        size_t w = strcspn(p, ", ");
        if (w == n && strncmp(p, group, n) == 0) return true;
        p += w;
        p += strspn(p, ", ");
    }
    return false;
}

int bench_prepare(char *petrel, char *root, size_t cap, const char *name) {
    const char *bin = getenv("PETREL_BIN");
    if (!bin || !*bin) bin = "bin/petrel";
    if (!realpath(bin, petrel) || access(petrel, X_OK) != 0) {
        fprintf(stderr, "bench: no broker binary '%s' (set PETREL_BIN)\n", bin);
        return -1;
    }
    if (bench_scratch_root(root, cap, name) != 0) return -1;
    bench_catch_signals();
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

int bench_scratch_root(char *root, size_t cap, const char *name) {
    const char *parent = getenv("PETREL_BENCH_DIR");
    if (!parent || !*parent) parent = "/tmp";
    if (mq_mkdirs(parent) != MQ_OK) {
        fprintf(stderr, "bench: cannot create '%s'\n", parent);
        return -1;
    }
    int n = snprintf(root, cap, "%s/%s-XXXXXX", parent, name);
    if (n < 0 || (size_t)n >= cap || !mkdtemp(root)) {
        fprintf(stderr, "bench: cannot create a directory under '%s': %s\n", parent,
                strerror(errno));
        return -1;
    }
    return 0;
}

static void cpu_model(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof(line), f)) {
        char *p = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && p) {
            p++;
            while (*p == ' ') p++;
            p[strcspn(p, "\n")] = '\0';
            snprintf(buf, cap, "%s", p);
            break;
        }
    }
    fclose(f);
}

void bench_print_machine(const char *prog) {
    char date[64];
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S %z", &tm);
    struct utsname u;
    if (uname(&u) != 0) memset(&u, 0, sizeof(u));
    char cpu[256];
    cpu_model(cpu, sizeof(cpu));
    printf("petrel %s  %s\n", prog, date);
    printf("kernel  %s %s %s, %ld online CPUs\n", u.sysname, u.release, u.machine,
           sysconf(_SC_NPROCESSORS_ONLN));
    printf("cpu     %s\n", cpu);
}

/* ======================================================================
 * Latency histogram
 * ====================================================================== */

static size_t h_index(uint64_t v) {
    if (v < (2u << HIST_SUB_BITS)) return (size_t)v;
    int e = 63 - __builtin_clzll(v) - HIST_SUB_BITS;
    return (size_t)e * 32 + (size_t)(v >> e);
}

static double h_value(size_t idx) {
    if (idx < (2u << HIST_SUB_BITS)) return (double)idx;
    int e = (int)(idx / 32) - 1;
    double lo = (double)((idx % 32 + 32) << e);
    return lo + (double)((uint64_t)1 << e) / 2; /* bucket middle */
}

void hist_add(Hist *h, uint64_t v) {
    h->n[h_index(v)]++;
    h->count++;
}

void hist_merge(Hist *into, const Hist *from) {
    for (size_t i = 0; i < HIST_BUCKETS; i++) into->n[i] += from->n[i];
    into->count += from->count;
}

double hist_pct(const Hist *h, double p) {
    if (!h->count) return NAN;
    uint64_t want = (uint64_t)ceil(p * (double)h->count);
    if (want == 0) want = 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < HIST_BUCKETS; i++) {
        seen += h->n[i];
        if (seen >= want) return h_value(i);
    }
    return NAN;
}

/* ======================================================================
 * Child processes, CPU time, memory
 * ====================================================================== */

SysCpu bench_sys_cpu(void) {
    SysCpu c = {NAN, NAN, NAN};
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return c;
    unsigned long long v[8] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (n != 8) return c;
    /* user nice system idle iowait irq softirq steal */
    double tick = (double)sysconf(_SC_CLK_TCK);
    c.procs = (double)(v[0] + v[1] + v[2] + v[5]) / tick;
    c.softirq = (double)v[6] / tick;
    c.steal = (double)v[7] / tick;
    return c;
}

/* stat_cpu_secs reads utime + stime from a /proc/.../stat file. */
static double stat_cpu_secs(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NAN;
    char line[1024];
    bool got = fgets(line, sizeof(line), f) != NULL;
    fclose(f);
    char *p = got ? strrchr(line, ')') : NULL; /* the name may hold spaces */
    unsigned long long ut = 0;
    unsigned long long st = 0;
    /* After ')': state (field 3) ... utime is field 14, stime 15. */
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
                     &st) != 2)
        return NAN;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

double bench_cpu_secs(pid_t pid) {
    if (pid == 0) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
               (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    return stat_cpu_secs(path);
}

int bench_thread_cpu(pid_t pid, ThreadCpu *out, int cap) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while (n < cap && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char p2[128];
        ThreadCpu *t = &out[n];
        t->tid = atoi(e->d_name);
        snprintf(p2, sizeof(p2), "/proc/%d/task/%d/stat", (int)pid, t->tid);
        t->secs = stat_cpu_secs(p2);
        if (isnan(t->secs)) continue;
        snprintf(p2, sizeof(p2), "/proc/%d/task/%d/comm", (int)pid, t->tid);
        FILE *f = fopen(p2, "r");
        if (!f || !fgets(t->comm, sizeof(t->comm), f)) snprintf(t->comm, sizeof(t->comm), "?");
        if (f) fclose(f);
        t->comm[strcspn(t->comm, "\n")] = '\0';
        n++;
    }
    closedir(d);
    return n;
}

void bench_thread_cores(const ThreadCpu *before, int nbefore, const ThreadCpu *after,
                        int nafter, double wall, char *buf, size_t cap) {
    enum { SHOWN = 6 };
    int idx[SHOWN];
    double cores[SHOWN];
    int k = 0;
    for (int i = 0; i < nafter; i++) {
        double c = after[i].secs;
        for (int j = 0; j < nbefore; j++) {
            if (before[j].tid == after[i].tid) {
                c -= before[j].secs;
                break;
            }
        }
        c /= wall;
        if (c < 0.01) continue;
        int at = k < SHOWN ? k++ : SHOWN;
        while (at > 0 && cores[at - 1] < c) {
            if (at < SHOWN) {
                cores[at] = cores[at - 1];
                idx[at] = idx[at - 1];
            }
            at--;
        }
        if (at < SHOWN) {
            cores[at] = c;
            idx[at] = i;
        }
    }
    size_t o = 0;
    snprintf(buf, cap, "-");
    for (int i = 0; i < k && o < cap; i++) {
        int w = snprintf(buf + o, cap - o, "%s%s/%d %.2f", i ? ", " : "", after[idx[i]].comm,
                         after[idx[i]].tid, cores[i]);
        if (w < 0) break;
        o += (size_t)w;
    }
}

long bench_rss_anon_kib(pid_t pid) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "RssAnon: %ld kB", &kib) == 1) break;
    }
    fclose(f);
    return kib;
}

pid_t bench_spawn(char *const *argv, const char *out_path) {
    int fd = open(out_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "bench: cannot open '%s': %s\n", out_path, strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        signal(SIGPIPE, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (in >= 0) dup2(in, STDIN_FILENO);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        execvp(argv[0], argv);
        fprintf(stderr, "bench: cannot run '%s': %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fd);
    if (pid < 0) fprintf(stderr, "bench: fork: %s\n", strerror(errno));
    return pid;
}

int bench_stop_pid(pid_t pid, long wait_ms) {
    if (pid <= 0) return -1;
    kill(pid, SIGTERM);
    int64_t deadline = mq_mono_ns() + wait_ms * 1000000;
    int ws = 0;
    for (;;) {
        pid_t r = waitpid(pid, &ws, WNOHANG);
        if (r == pid) return e2e_exit_status(ws);
        if (r < 0 && errno != EINTR) return -1;
        if (mq_mono_ns() >= deadline) break;
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "bench: pid %d ignored SIGTERM for %ld ms; SIGKILL\n", (int)pid, wait_ms);
    kill(pid, SIGKILL);
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
    }
    return e2e_exit_status(ws);
}

/* ======================================================================
 * A minimal HTTP/1.1 client
 * ====================================================================== */

void http_init(Http *h, int port) {
    memset(h, 0, sizeof(*h));
    h->fd = -1;
    h->port = port;
}

void http_close(Http *h) {
    if (h->fd >= 0) close(h->fd);
    h->fd = -1;
}

void http_free(Http *h) {
    http_close(h);
    free(h->buf);
    free(h->out);
    h->buf = h->out = NULL;
    h->cap = h->out_cap = 0;
}

int http_connect(Http *h) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)h->port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {HTTP_IO_TIMEOUT_S, 0};
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    h->fd = fd;
    return 0;
}

static bool grow(char **p, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 16384;
    while (c < need) c *= 2;
    char *n = realloc(*p, c);
    if (!n) return false;
    *p = n;
    *cap = c;
    return true;
}

bool http_send_all(int fd, const char *p, size_t len) {
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        len -= (size_t)n;
    }
    return true;
}

/* header_value finds header 'name' (lowercase, with the colon) in the
 * NUL-terminated head 'head'; returns its value or NULL. */
static const char *header_value(const char *head, const char *name) {
    const char *p = strcasestr(head, name);
    while (p && p != head && p[-1] != '\n') p = strcasestr(p + 1, name);
    if (!p) return NULL;
    p += strlen(name);
    while (*p == ' ') p++;
    return p;
}

/* Reads one response into h->buf; the status, or -1. */
static int read_response(Http *h, const char **body, size_t *body_len) {
    size_t have = 0;
    size_t head_len = 0;
    for (;;) {
        if (!grow(&h->buf, &h->cap, have + 4096 + 1)) return -1;
        ssize_t n = recv(h->fd, h->buf + have, h->cap - have - 1, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        have += (size_t)n;
        char *e = memmem(h->buf, have, "\r\n\r\n", 4);
        if (e) {
            head_len = (size_t)(e - h->buf) + 4;
            break;
        }
        if (have > 65536) return -1;
    }
    char saved = h->buf[head_len];
    h->buf[head_len] = '\0';
    int status = 0;
    if (sscanf(h->buf, "HTTP/1.%*d %d", &status) != 1) return -1;
    const char *cl = header_value(h->buf, "content-length:");
    const char *conn = header_value(h->buf, "connection:");
    bool close_after = conn && strncasecmp(conn, "close", 5) == 0;
    if (header_value(h->buf, "transfer-encoding:")) return -1; /* not needed here */
    h->buf[head_len] = saved;
    size_t len = cl ? (size_t)strtoull(cl, NULL, 10) : 0;
    if (!grow(&h->buf, &h->cap, head_len + len + 1)) return -1;
    while (have < head_len + len) {
        ssize_t n = recv(h->fd, h->buf + have, head_len + len - have, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        have += (size_t)n;
    }
    h->buf[head_len + len] = '\0';
    *body = h->buf + head_len;
    *body_len = len;
    if (close_after) http_close(h);
    return status;
}

int http_call(Http *h, const char *method, const char *path, const char *ctype,
              const char *body, size_t len, const char **resp, size_t *resp_len) {
    *resp = "";
    *resp_len = 0;
    if (h->fd < 0 && http_connect(h) != 0) return -1;
    char head[512];
    int n = snprintf(head, sizeof(head),
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s%s%sContent-Length: %zu\r\n\r\n",
                     method, path, h->port, ctype ? "Content-Type: " : "", ctype ? ctype : "",
                     ctype ? "\r\n" : "", body ? len : 0);
    if (n < 0 || (size_t)n >= sizeof(head)) return -1;
    size_t total = (size_t)n + (body ? len : 0);
    if (!grow(&h->out, &h->out_cap, total)) return -1;
    memcpy(h->out, head, (size_t)n);
    if (body) memcpy(h->out + n, body, len);
    int status = http_send_all(h->fd, h->out, total) ? read_response(h, resp, resp_len) : -1;
    if (status < 0) http_close(h);
    return status;
}

bool http_expect(Http *h, const char *what, const char *method, const char *path,
                 const char *ctype, const char *body, size_t len, int status,
                 const char *needle, json_t **root) {
    const char *resp = NULL;
    size_t resp_len = 0;
    int got = http_call(h, method, path, ctype, body, len, &resp, &resp_len);
    bool ok = got == status && (!needle || strstr(resp, needle));
    if (ok && root) {
        *root = json_loadb(resp, resp_len, 0, NULL);
        ok = *root != NULL;
    }
    if (!ok) {
        fprintf(stderr, "bench: %s: %s %s answered %d (wanted %d with '%s'): %.300s\n", what,
                method, path, got, status, needle ? needle : "", resp);
    }
    return ok;
}

/* ======================================================================
 * Brokers
 * ====================================================================== */

int srv_start(Srv *s, const char *petrel, const char *root, const char *label,
              const char *const *extra) {
    memset(s, 0, sizeof(*s));
    snprintf(s->label, sizeof(s->label), "%s", label);
    int n = snprintf(s->dir, sizeof(s->dir), "%s/broker-%s", root, label);
    if (n < 0 || (size_t)n >= sizeof(s->dir)) return -1;
    snprintf(s->log, sizeof(s->log), "%s/broker.log", s->dir);
    if (mkdir(s->dir, 0755) != 0) {
        fprintf(stderr, "bench: cannot create '%s': %s\n", s->dir, strerror(errno));
        return -1;
    }
    char data[PATH_MAX + 8], port_file[PATH_MAX + 8];
    snprintf(data, sizeof(data), "%s/data", s->dir);
    snprintf(port_file, sizeof(port_file), "%s/port", s->dir);
    char *argv[40] = {(char *)petrel, "standalone", "--listen", "127.0.0.1:0", "--data", data,
                      "--port-file", port_file, "--logLevel=warn"};
    size_t argc = 9;
    for (size_t i = 0; extra && extra[i] && argc < 20; i++) argv[argc++] = (char *)extra[i];
    /* BENCH_BROKER_FLAGS: more flags, space-separated (later ones win). */
    char *flags = strdup(getenv("BENCH_BROKER_FLAGS") ? getenv("BENCH_BROKER_FLAGS") : "");
    char *save = NULL;
    for (char *f = flags ? strtok_r(flags, " ", &save) : NULL; f && argc < 39;
         f = strtok_r(NULL, " ", &save))
        argv[argc++] = f;
    argv[argc] = NULL;
    s->pid = bench_spawn(argv, s->log);
    free(flags);
    if (s->pid < 0) {
        s->pid = 0;
        return -1;
    }
    int64_t deadline = mq_mono_ns() + (int64_t)SRV_WAIT_START_MS * 1000000;
    while (mq_mono_ns() < deadline && !bench_interrupted) {
        s->port = e2e_read_port(port_file);
        if (s->port > 0) {
            snprintf(s->url, sizeof(s->url), "http://127.0.0.1:%d", s->port);
            return 0;
        }
        int ws = 0;
        if (waitpid(s->pid, &ws, WNOHANG) == s->pid) {
            fprintf(stderr, "bench: broker %s exited with status %d before listening (log: %s)\n",
                    label, e2e_exit_status(ws), s->log);
            s->pid = 0;
            return -1;
        }
        bench_sleep_ms(20);
    }
    fprintf(stderr, "bench: broker %s: no port file after %d ms\n", label, SRV_WAIT_START_MS);
    bench_stop_pid(s->pid, 0);
    s->pid = 0;
    return -1;
}

void srv_stop(Srv *s, bool keep) {
    if (s->pid > 0) {
        int64_t t0 = mq_mono_ns();
        int st = bench_stop_pid(s->pid, SRV_WAIT_STOP_MS);
        printf("  broker %s stopped: exit status %d after %.0f ms\n", s->label, st,
               (double)(mq_mono_ns() - t0) / 1e6);
        if (st != 0) {
            fprintf(stderr, "bench: broker %s exited with status %d on SIGTERM\n", s->label, st);
        }
        s->pid = 0;
    }
    FILE *f = s->dir[0] ? fopen(s->log, "r") : NULL;
    if (f) {
        char line[512];
        int n = 0;
        while (fgets(line, sizeof(line), f)) {
            if (n++ < 12) printf("  broker %s log: %s", s->label, line);
        }
        if (n > 12) printf("  broker %s log: ... %d lines in all\n", s->label, n);
        fclose(f);
    }
    if (s->dir[0] && !keep) mq_rmtree(s->dir);
    s->dir[0] = '\0';
    fflush(stdout);
}

/* ======================================================================
 * Messages and topics
 * ====================================================================== */

void bench_make_body(char *out, size_t len, unsigned seed) {
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    for (size_t i = 0; i < len; i++) out[i] = alphabet[(i * 7 + seed) % (sizeof(alphabet) - 1)];
}

size_t bench_json_msg(char *out, unsigned seed) {
    memcpy(out, "{\"body\":\"", 9);
    bench_make_body(out + 9, BENCH_BODY_LEN, seed);
    memcpy(out + 9 + BENCH_BODY_LEN, "\"}", 3);
    return 9 + BENCH_BODY_LEN + 2;
}

char *bench_json_batch(size_t count, size_t *len) {
    char one[BENCH_BODY_LEN + 16];
    size_t one_len = bench_json_msg(one, 0);
    size_t cap = 32 + count * (one_len + 1);
    char *b = malloc(cap);
    if (!b) return NULL;
    size_t n = 0;
    n += (size_t)sprintf(b, "{\"messages\":[");
    for (size_t i = 0; i < count; i++) {
        if (i) b[n++] = ',';
        one_len = bench_json_msg(b + n, (unsigned)i);
        n += one_len;
    }
    n += (size_t)sprintf(b + n, "]}");
    *len = n;
    return b;
}

int bench_queue_ranges(Http *h, const char *topic, uint64_t *qmin, uint64_t *qmax, int cap) {
    char path[128];
    snprintf(path, sizeof(path), "/v1/topics/%s/queues", topic);
    json_t *root = NULL;
    if (!http_expect(h, "queues", "GET", path, NULL, NULL, 0, 200, NULL, &root)) return -1;
    int n = 0;
    size_t i;
    json_t *q;
    json_array_foreach(root, i, q) {
        if (n == cap) break;
        qmin[n] = (uint64_t)json_integer_value(json_object_get(q, "minOffset"));
        qmax[n] = (uint64_t)json_integer_value(json_object_get(q, "maxOffset"));
        n++;
    }
    json_decref(root);
    return n;
}

int bench_settle_queues(Http *h, const char *topic, uint64_t *qmin, uint64_t *qmax, int cap) {
    uint64_t last = UINT64_MAX;
    int n = -1;
    for (int tries = 0; tries < 100 && !bench_interrupted; tries++) {
        n = bench_queue_ranges(h, topic, qmin, qmax, cap);
        if (n < 0) return -1;
        uint64_t sum = 0;
        for (int q = 0; q < n; q++) sum += qmax[q] - qmin[q];
        if (sum == last) return n;
        last = sum;
        bench_sleep_ms(100);
    }
    return n;
}

typedef struct Filler {
    int port;
    const char *path;     /* POST target */
    const char *body;     /* a batch of BENCH_PREFILL_BATCH */
    size_t len;
    atomic_long *left;    /* messages still to send, shared */
    bool failed;          /* out */
} Filler;

static void *filler_main(void *arg) {
    Filler *f = arg;
    Http h;
    http_init(&h, f->port);
    while (!bench_interrupted && atomic_fetch_sub(f->left, BENCH_PREFILL_BATCH) > 0) {
        const char *resp = NULL;
        size_t n = 0;
        int st = http_call(&h, "POST", f->path, "application/json", f->body, f->len, &resp, &n);
        if (st != 200) {
            fprintf(stderr, "bench: prefill: answer %d: %.200s\n", st, resp);
            f->failed = true;
            break;
        }
    }
    http_free(&h);
    return NULL;
}

bool bench_prefill(int port, Http *h, const char *topic, long total) {
    char path[160];
    snprintf(path, sizeof(path), "/v1/topics/%s", topic);
    const char *resp = NULL;
    size_t resp_len = 0;
    int st = http_call(h, "GET", path, NULL, NULL, 0, &resp, &resp_len);
    uint64_t have = 0;
    if (st != 404) { /* 404: the first batch creates it */
        uint64_t qmin[64], qmax[64];
        int nq = bench_settle_queues(h, topic, qmin, qmax, 64);
        if (nq < 0) return false;
        for (int q = 0; q < nq; q++) have += qmax[q] - qmin[q];
    }
    long want = total - (long)have;
    if (want <= 0) return true;
    size_t len = 0;
    char *body = bench_json_batch(BENCH_PREFILL_BATCH, &len);
    if (!body) return false;
    snprintf(path, sizeof(path), "/v1/topics/%s/messages", topic);
    atomic_long left;
    atomic_init(&left, want);
    Filler f[2];
    pthread_t tid[2];
    int started = 0;
    int64_t t0 = mq_mono_ns();
    for (int i = 0; i < 2; i++) {
        f[i] = (Filler){port, path, body, len, &left, false};
        if (pthread_create(&tid[i], NULL, filler_main, &f[i]) != 0) break;
        started++;
    }
    bool ok = started > 0;
    for (int i = 0; i < started; i++) {
        pthread_join(tid[i], NULL);
        if (f[i].failed) ok = false;
    }
    double secs = (double)(mq_mono_ns() - t0) / 1e9;
    free(body);
    printf("  prefill    %ld msgs in batches of %d in %.2f s (%.0f msgs/s, 2 connections)\n",
           want, BENCH_PREFILL_BATCH, secs, (double)want / secs);
    return ok && !bench_interrupted;
}

/* ======================================================================
 * Produce -> consume latency at a paced rate
 * ====================================================================== */

bool lat_run_init(LatRun *run, int port, const char *topic, double rate, int producers,
                  double secs, int64_t warmup_ns) {
    memset(run, 0, sizeof(*run));
    run->port = port;
    run->topic = topic;
    run->rate = rate;
    run->producers = producers;
    run->cap = (uint64_t)(rate * secs) + 16;
    run->warmup_ns = warmup_ns;
    run->sent_ns = calloc(run->cap, sizeof(*run->sent_ns));
    run->seen = calloc(run->cap, sizeof(*run->seen));
    atomic_init(&run->sent, 0);
    atomic_init(&run->last_ns, 0);
    atomic_init(&run->producers_left, producers);
    atomic_init(&run->failed, false);
    atomic_init(&run->early, 0);
    return run->sent_ns && run->seen;
}

void lat_run_free(LatRun *run) {
    free(run->sent_ns);
    free(run->seen);
    run->sent_ns = NULL;
    run->seen = NULL;
}

void bench_sleep_until(int64_t t_ns) {
    struct timespec ts = {(time_t)(t_ns / 1000000000), (long)(t_ns % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR &&
           !bench_interrupted) {
    }
}

int64_t lat_timer_ms(const LatRun *run, uint64_t seq) {
    if (run->timer_max_ms <= 0) return 0;
    uint64_t z = seq + 0x9E3779B97F4A7C15ull; /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    uint64_t span = (uint64_t)(run->timer_max_ms - run->timer_min_ms) + 1;
    return run->timer_min_ms + (int64_t)(z % span);
}

/* lat_msg writes {"body":"seq=<12 digits>;<padding>"} (BENCH_BODY_LEN body). */
static size_t lat_msg(char *out, uint64_t seq) {
    size_t n = bench_json_msg(out, (unsigned)seq);
    char tag[20];
    snprintf(tag, sizeof(tag), "seq=%012" PRIu64 ";", (uint64_t)(seq % 1000000000000ull));
    memcpy(out + 9, tag, strlen(tag));
    return n;
}

void *lat_producer_main(void *arg) {
    LatProducer *p = arg;
    LatRun *run = p->run;
    prctl(PR_SET_TIMERSLACK, 1UL); /* wake on time, not up to 50 us late */
    Http h;
    http_init(&h, run->port);
    char path[160];
    snprintf(path, sizeof(path), "/v1/topics/%s/messages", run->topic);
    char body[BENCH_BODY_LEN + 48];
    for (uint64_t seq = (uint64_t)p->idx; seq < run->cap; seq += (uint64_t)run->producers) {
        int64_t due = run->t0 + (int64_t)((double)seq * 1e9 / run->rate);
        if (due >= run->end || bench_interrupted || atomic_load(&run->failed)) break;
        bench_sleep_until(due);
        size_t len = lat_msg(body, seq);
        if (run->delay_level > 0 && len > 0 && body[len - 1] == '}') {
            /* the same message, delayed: {"body":"...","delayLevel":N} */
            int k = snprintf(body + len - 1, sizeof(body) - (len - 1), ",\"delayLevel\":%d}",
                             run->delay_level);
            if (k > 0) len = len - 1 + (size_t)k;
        } else if (run->timer_max_ms > 0 && len > 0 && body[len - 1] == '}') {
            /* a timer: {"body":"...","delayMs":N} */
            int k = snprintf(body + len - 1, sizeof(body) - (len - 1), ",\"delayMs\":%" PRId64 "}",
                             lat_timer_ms(run, seq));
            if (k > 0) len = len - 1 + (size_t)k;
        }
        int64_t t = mq_mono_ns();
        if (t - due > 1000000) p->late++;
        atomic_store_explicit(&run->sent_ns[seq], t, memory_order_release);
        int64_t last = atomic_load(&run->last_ns);
        while (t > last && !atomic_compare_exchange_weak(&run->last_ns, &last, t)) {
        }
        const char *resp = NULL;
        size_t n = 0;
        int st = http_call(&h, "POST", path, "application/json", body, len, &resp, &n);
        hist_add(&p->rtt, (uint64_t)(mq_mono_ns() - t));
        if (st != 200 || !strstr(resp, "\"SEND_OK\"")) {
            fprintf(stderr, "bench: latency: produce answered %d: %.200s\n", st, resp);
            atomic_store(&run->failed, true);
            break;
        }
        atomic_fetch_add(&run->sent, 1);
    }
    atomic_fetch_sub(&run->producers_left, 1);
    http_free(&h);
    return NULL;
}

static bool starts_with(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

size_t lat_take(LatConsumer *c, const char *resp, int64_t t) {
    static const char key[] = "\"body\":\"seq=";
    LatRun *run = c->run;
    size_t n = 0;
    for (const char *p = strstr(resp, key); p; p = strstr(p + 1, key)) {
        unsigned long long seq = 0;
        n++;
        c->received++;
        if (sscanf(p + sizeof(key) - 1, "%12llu;", &seq) != 1 || seq >= run->cap) {
            c->unknown++;
            continue;
        }
        int64_t ts = atomic_load_explicit(&run->sent_ns[seq], memory_order_acquire);
        if (ts == 0) {
            c->unknown++;
            continue;
        }
        if (atomic_fetch_add(&run->seen[seq], 1) != 0) {
            c->dups++;
            continue;
        }
        /* a delayed message: how late */
        int64_t lat = t - ts - run->delay_ns - lat_timer_ms(run, seq) * 1000000;
        if (lat < 0) {
            atomic_fetch_add(&run->early, 1); /* delivered before its time */
            lat = 0;
        }
        hist_add(&c->all, (uint64_t)lat);
        if (ts >= run->t0 + run->warmup_ns) hist_add(&c->lat, (uint64_t)lat);
        if (c->dump)
            fprintf(c->dump, "%.3f %.1f\n", (double)(ts - run->t0) / 1e6, (double)(t - ts) / 1e3);
    }
    return n;
}

void *lat_pull_main(void *arg) {
    LatConsumer *c = arg;
    LatRun *run = c->run;
    Http h;
    http_init(&h, run->port);
    uint64_t offset = 0;
    int64_t give_up = run->end + 5 * (int64_t)1000000000;
    while (!bench_interrupted && mq_mono_ns() < give_up && !atomic_load(&run->failed)) {
        if (atomic_load(&run->producers_left) == 0 &&
            c->received - c->unknown - c->dups >= atomic_load(&run->sent))
            break;
        char path[160];
        snprintf(path, sizeof(path),
                 "/v1/topics/%s/queues/0/messages?offset=%" PRIu64 "&max=1000&waitMs=500",
                 run->topic, offset);
        const char *resp = NULL;
        size_t n = 0;
        int st = http_call(&h, "GET", path, NULL, NULL, 0, &resp, &n);
        int64_t t = mq_mono_ns(); /* the consumer has the messages */
        const char *next = st == 200 ? strstr(resp, "\"nextOffset\":") : NULL;
        unsigned long long off = 0;
        bool good = next && sscanf(next + 13, "%llu", &off) == 1 &&
                    (starts_with(resp, "{\"status\":\"FOUND\",") ||
                     starts_with(resp, "{\"status\":\"NO_NEW_MSG\","));
        if (!good) {
            fprintf(stderr, "bench: latency: pull answered %d: %.200s\n", st, resp);
            atomic_store(&run->failed, true);
            break;
        }
        c->polls++;
        if (lat_take(c, resp, t) == 0) c->empty++;
        offset = off;
    }
    http_free(&h);
    return NULL;
}

/* ======================================================================
 * The fdatasync ceiling
 * ====================================================================== */

double bench_fdatasync_rate(const char *dir, off_t prealloc, double secs, double *p50_us,
                            double *p99_us) {
    double rate = NAN;
    *p50_us = NAN;
    *p99_us = NAN;
    char *path = NULL;
    if (asprintf(&path, "%s/fsync.dat", dir) < 0) path = NULL;
    Hist *hist = calloc(1, sizeof(*hist));
    char *page = aligned_alloc(4096, 4096);
    int fd = path ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
    /* Preallocated like a commit-log segment (mfile.c uses fallocate). */
    if (!hist || !page || fd < 0 || fallocate(fd, 0, 0, prealloc) != 0 || fdatasync(fd) != 0) {
        fprintf(stderr, "bench: fdatasync: cannot set up '%s': %s\n", path ? path : "?",
                strerror(errno));
        goto out;
    }
    memset(page, 'f', 4096);
    off_t off = 0;
    uint64_t n = 0;
    int64_t t0 = mq_mono_ns();
    int64_t end = t0 + (int64_t)(secs * 1e9);
    int64_t t = t0;
    while (t < end && !bench_interrupted) {
        if (pwrite(fd, page, 4096, off) != 4096 || fdatasync(fd) != 0) {
            fprintf(stderr, "bench: fdatasync loop: %s\n", strerror(errno));
            goto out;
        }
        int64_t t1 = mq_mono_ns();
        hist_add(hist, (uint64_t)(t1 - t));
        t = t1;
        n++;
        off = (off + 4096) % prealloc;
        page[0]++; /* a different page each time */
    }
    rate = (double)n / ((double)(t - t0) / 1e9);
    *p50_us = hist_pct(hist, 0.50) / 1e3;
    *p99_us = hist_pct(hist, 0.99) / 1e3;
out:
    if (fd >= 0) close(fd);
    if (path) unlink(path);
    free(path);
    free(page);
    free(hist);
    return rate;
}

/* ======================================================================
 * Results table
 * ====================================================================== */

enum { MAX_ROWS = 64, CELL = 96 };
static Row rows[MAX_ROWS];
static size_t nrows;

Row *row_add(const char *unit, double value, const char *fmt, ...) {
    static Row spare;
    if (nrows == MAX_ROWS) return &spare;
    Row *r = &rows[nrows++];
    memset(r, 0, sizeof(*r));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->what, sizeof(r->what), fmt, ap);
    va_end(ap);
    snprintf(r->unit, sizeof(r->unit), "%s", unit);
    r->value = value;
    r->ratio = NAN;
    r->met = isnan(value) ? MET_ERROR : MET_NONE;
    return r;
}

/* fmt_num prints 'v' with thousands separators above 1000, else with up to
 * two decimals. */
static void fmt_num(char *buf, size_t cap, double v) {
    if (isnan(v)) {
        snprintf(buf, cap, "-");
        return;
    }
    if (fabs(v) < 1000) {
        snprintf(buf, cap, fabs(v) < 10 ? "%.2f" : "%.1f", v);
        return;
    }
    char digits[32];
    snprintf(digits, sizeof(digits), "%.0f", fabs(v));
    size_t n = strlen(digits);
    size_t o = 0;
    if (v < 0 && o + 1 < cap) buf[o++] = '-';
    for (size_t i = 0; i < n && o + 2 < cap; i++) {
        if (i && (n - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
}

void row_ceiling(Row *r, double ceiling, const char *unit, const char *what) {
    char num[32];
    fmt_num(num, sizeof(num), ceiling);
    snprintf(r->ceiling, sizeof(r->ceiling), "%s %s %s", num, unit, what);
    if (!isnan(r->value) && ceiling > 0) r->ratio = r->value / ceiling;
}

void row_target(Row *r, double x, bool at_least, double limit, const char *text) {
    snprintf(r->target, sizeof(r->target), "%s", text);
    if (r->met == MET_ERROR) return;
    if (isnan(x)) {
        r->met = MET_ERROR;
        return;
    }
    r->met = (at_least ? x >= limit : x < limit) ? MET_YES : MET_NO;
}

static void print_table(void) {
    const char *head[7] = {"what", "value", "unit", "ceiling (same run)", "ratio", "target",
                           "met?"};
    static char cell[MAX_ROWS][7][CELL];
    size_t w[7];
    for (int c = 0; c < 7; c++) w[c] = strlen(head[c]);
    for (size_t i = 0; i < nrows; i++) {
        const Row *r = &rows[i];
        snprintf(cell[i][0], CELL, "%s", r->what);
        fmt_num(cell[i][1], CELL, r->value);
        snprintf(cell[i][2], CELL, "%s", r->unit);
        snprintf(cell[i][3], CELL, "%s", r->ceiling[0] ? r->ceiling : "-");
        if (isnan(r->ratio))
            snprintf(cell[i][4], CELL, "-");
        else
            snprintf(cell[i][4], CELL, r->ratio < 10 ? "%.2fx" : "%.1fx", r->ratio);
        snprintf(cell[i][5], CELL, "%s", r->target[0] ? r->target : "-");
        snprintf(cell[i][6], CELL, "%s",
                 r->met == MET_YES     ? "yes"
                 : r->met == MET_NO    ? "NO"
                 : r->met == MET_ERROR ? "ERROR"
                                       : "-");
        for (int c = 0; c < 7; c++)
            if (strlen(cell[i][c]) > w[c]) w[c] = strlen(cell[i][c]);
    }
    /* Text columns are left-aligned, numbers right-aligned. */
    const bool right[7] = {false, true, false, false, true, false, false};
    for (size_t i = 0; i <= nrows + 1; i++) {
        for (int c = 0; c < 7; c++) {
            if (i == 1) {
                for (size_t k = 0; k < w[c] + (c ? 2 : 1); k++) putchar('-');
                if (c < 6) putchar('+');
                continue;
            }
            const char *s = i == 0 ? head[c] : cell[i - 2][c];
            printf(c ? " " : "");
            printf(right[c] && i ? "%*s" : "%-*s", (int)w[c], s);
            printf(c < 6 ? " |" : "");
        }
        putchar('\n');
    }
}

int bench_report(int64_t t0_ns, int case_errors) {
    printf("\n");
    print_table();
    size_t targets = 0;
    size_t met = 0;
    size_t errors = 0;
    for (size_t i = 0; i < nrows; i++) {
        if (rows[i].target[0]) targets++;
        if (rows[i].met == MET_YES) met++;
        if (rows[i].met == MET_ERROR) errors++;
    }
    printf("\nbench: %zu figures, %zu targets met, %zu missed%s (%.0f s%s)\n", nrows, met,
           targets - met, errors || case_errors ? ", some figures failed to run" : "",
           (double)(mq_mono_ns() - t0_ns) / 1e9, bench_interrupted ? ", interrupted" : "");
    fflush(stdout);
    return case_errors || errors || bench_interrupted ? 1 : 0;
}

void bench_print_load(void) {
    SysCpu c0 = bench_sys_cpu();
    int64_t t0 = mq_mono_ns();
    bench_sleep_ms(1000);
    SysCpu c1 = bench_sys_cpu();
    double secs = (double)(mq_mono_ns() - t0) / 1e9;
    printf("load    %.2f cores busy in the second before the start (other processes; steal "
           "%.2f)\n", (c1.procs - c0.procs + c1.softirq - c0.softirq) / secs,
           (c1.steal - c0.steal) / secs);
}
