/*
 * The gateway's addon (native/README.md): the two socket operations the transparent-capture (TPROXY)
 * mode needs and Node's `net` lacks, a thread's scheduling policy, and giving the C heap's freed
 * pages back. Node-API only, C only, Linux only.
 *
 *   listenTransparent(host, port, backlog = 511) -> fd
 *     a listening TCP socket with IP_TRANSPARENT / IPV6_TRANSPARENT, for net.Server.listen({ fd }).
 *   connectMarked(address, port, mark, timeoutMs) -> Promise<fd>
 *     a TCP connection whose packets all carry SO_MARK = mark (set before connect), made on the
 *     libuv threadpool, for new net.Socket({ fd }).
 *
 *   setBatchPolicy() -> undefined
 *     the calling thread under SCHED_BATCH (its nice value kept): the scheduler no longer lets it
 *     preempt another thread when it wakes. The SQLite writer thread calls it (docs/performance.md).
 *
 *   trimMemory() -> Promise<boolean | null>
 *     glibc's malloc_trim(0) on the libuv threadpool: the pages of the C heap's free chunks go back
 *     to the system. true when some did, false when none, null where the C library has no such
 *     call (musl). src/platform/system/MallocTrim.ts calls it (docs/performance.md).
 *
 * Errors are Errors whose message names the call and the failed system call
 * ("listenTransparent 127.0.0.1:8443: bind(): Address already in use"), with `code` (the errno
 * name), `syscall` and `errno` (negative, as Node's own socket errors). Bad arguments are
 * TypeErrors or RangeErrors, thrown at once.
 */
#define NAPI_VERSION 8
#include <node_api.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#ifndef IP_TRANSPARENT
#define IP_TRANSPARENT 19
#endif
#ifndef IPV6_TRANSPARENT
#define IPV6_TRANSPARENT 75
#endif
/* Linux's value; <sched.h> declares it only under _GNU_SOURCE. */
#ifndef SCHED_BATCH
#define SCHED_BATCH 3
#endif
#ifndef SO_MARK
#define SO_MARK 36
#endif

#define CHECK(call)                                                                  \
  do {                                                                               \
    if ((call) != napi_ok) {                                                         \
      napi_throw_error(env, NULL, "gateway_tproxy: a Node-API call failed: " #call); \
      return NULL;                                                                   \
    }                                                                                \
  } while (0)

/* The errno names Node uses for `code`. */
static const char* errno_name(int e) {
  switch (e) {
    case EPERM: return "EPERM";
    case EACCES: return "EACCES";
    case EADDRINUSE: return "EADDRINUSE";
    case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
    case EAFNOSUPPORT: return "EAFNOSUPPORT";
    case ECONNREFUSED: return "ECONNREFUSED";
    case ECONNRESET: return "ECONNRESET";
    case ETIMEDOUT: return "ETIMEDOUT";
    case ENETUNREACH: return "ENETUNREACH";
    case EHOSTUNREACH: return "EHOSTUNREACH";
    case ENETDOWN: return "ENETDOWN";
    case EINVAL: return "EINVAL";
    case ENOSYS: return "ENOSYS";
    case ESRCH: return "ESRCH";
    case EMFILE: return "EMFILE";
    case ENFILE: return "ENFILE";
    case ENOBUFS: return "ENOBUFS";
    case ENOMEM: return "ENOMEM";
    case ENOPROTOOPT: return "ENOPROTOOPT";
    case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
    case EINTR: return "EINTR";
    default: return "UNKNOWN";
  }
}

/* A parsed IPv4 or IPv6 literal with its port. */
typedef struct {
  int family;
  struct sockaddr_storage addr;
  socklen_t len;
  char label[INET6_ADDRSTRLEN + 8]; /* "127.0.0.1:8443" or "[::1]:8443" */
} endpoint;

static int parse_endpoint(const char* host, int port, endpoint* out) {
  memset(out, 0, sizeof(*out));
  struct sockaddr_in* v4 = (struct sockaddr_in*)&out->addr;
  struct sockaddr_in6* v6 = (struct sockaddr_in6*)&out->addr;
  if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)port);
    out->family = AF_INET;
    out->len = sizeof(*v4);
    snprintf(out->label, sizeof(out->label), "%s:%d", host, port);
    return 1;
  }
  if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons((uint16_t)port);
    out->family = AF_INET6;
    out->len = sizeof(*v6);
    snprintf(out->label, sizeof(out->label), "[%s]:%d", host, port);
    return 1;
  }
  return 0;
}

/*
 * An Error for a failed system call: the message "<what>: <call>: <detail or strerror>", where
 * `call` may name an option ("setsockopt(SO_MARK)"); `syscall` is the bare call, `code` the errno
 * name, `errno` negative as in Node's own socket errors.
 */
static napi_value make_sys_error(napi_env env, const char* what, const char* call, int err, const char* detail) {
  char text[512], syscall[32];
  snprintf(text, sizeof(text), "%s: %s%s: %s", what, call, strchr(call, '(') ? "" : "()", detail ? detail : strerror(err));
  snprintf(syscall, sizeof(syscall), "%s", call);
  char* paren = strchr(syscall, '(');
  if (paren != NULL) *paren = '\0';
  napi_value msg, code, error, sys, num;
  if (napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &msg) != napi_ok) return NULL;
  if (napi_create_string_utf8(env, errno_name(err), NAPI_AUTO_LENGTH, &code) != napi_ok) return NULL;
  if (napi_create_error(env, code, msg, &error) != napi_ok) return NULL;
  if (napi_create_string_utf8(env, syscall, NAPI_AUTO_LENGTH, &sys) == napi_ok) napi_set_named_property(env, error, "syscall", sys);
  if (napi_create_int32(env, -err, &num) == napi_ok) napi_set_named_property(env, error, "errno", num);
  return error;
}

static napi_value throw_sys_error(napi_env env, const char* what, const char* call, int err) {
  napi_value error = make_sys_error(env, what, call, err, NULL);
  if (error != NULL) napi_throw(env, error);
  return NULL;
}

/* Reads argument `i` as a string into buf; 0 (a TypeError thrown) when it is not one or too long. */
static int string_arg(napi_env env, napi_value value, const char* name, char* buf, size_t size) {
  napi_valuetype type;
  size_t len = 0;
  if (napi_typeof(env, value, &type) != napi_ok || type != napi_string) {
    char text[128];
    snprintf(text, sizeof(text), "%s must be a string (an IPv4 or IPv6 literal)", name);
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", text);
    return 0;
  }
  if (napi_get_value_string_utf8(env, value, buf, size, &len) != napi_ok || len >= size - 1) {
    char text[128];
    snprintf(text, sizeof(text), "%s is too long for an IP address", name);
    napi_throw_type_error(env, "ERR_INVALID_IP_ADDRESS", text);
    return 0;
  }
  return 1;
}

/* Reads an integer argument in [min, max]; a TypeError for a non-number, a RangeError outside. */
static int integer_arg(napi_env env, napi_value value, const char* name, double min, double max, double* out) {
  napi_valuetype type;
  if (napi_typeof(env, value, &type) != napi_ok || type != napi_number) {
    char text[128];
    snprintf(text, sizeof(text), "%s must be a number", name);
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", text);
    return 0;
  }
  double v;
  napi_get_value_double(env, value, &v);
  if (v != v || v < min || v > max || v != (double)(int64_t)v) {
    char text[160];
    snprintf(text, sizeof(text), "%s must be an integer from %.0f to %.0f", name, min, max);
    napi_throw_range_error(env, "ERR_OUT_OF_RANGE", text);
    return 0;
  }
  *out = v;
  return 1;
}

static int parse_literal(napi_env env, const char* host, int port, endpoint* ep) {
  if (parse_endpoint(host, port, ep)) return 1;
  char text[128];
  snprintf(text, sizeof(text), "%.64s is not an IPv4 or IPv6 literal", host);
  napi_throw_type_error(env, "ERR_INVALID_IP_ADDRESS", text);
  return 0;
}

/* listenTransparent(host, port, backlog = 511) */
static napi_value listen_transparent(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 2) {
    napi_throw_type_error(env, "ERR_MISSING_ARGS", "listenTransparent(host, port, backlog?) takes a host and a port");
    return NULL;
  }
  char host[INET6_ADDRSTRLEN + 1];
  double port, backlog = 511;
  if (!string_arg(env, argv[0], "host", host, sizeof(host))) return NULL;
  if (!integer_arg(env, argv[1], "port", 0, 65535, &port)) return NULL;
  if (argc >= 3) {
    napi_valuetype type;
    napi_typeof(env, argv[2], &type);
    if (type != napi_undefined && !integer_arg(env, argv[2], "backlog", 1, 65535, &backlog)) return NULL;
  }
  endpoint ep;
  if (!parse_literal(env, host, (int)port, &ep)) return NULL;
  char what[sizeof(ep.label) + 32];
  snprintf(what, sizeof(what), "listenTransparent %s", ep.label);

  int fd = socket(ep.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return throw_sys_error(env, what, "socket", errno);
  int one = 1;
  int err;
  const char* call = NULL;
  if (ep.family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) != 0) call = "setsockopt(IPV6_V6ONLY)";
  else if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) call = "setsockopt(SO_REUSEADDR)";
  else if (ep.family == AF_INET && setsockopt(fd, IPPROTO_IP, IP_TRANSPARENT, &one, sizeof(one)) != 0) call = "setsockopt(IP_TRANSPARENT)";
  else if (ep.family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_TRANSPARENT, &one, sizeof(one)) != 0) call = "setsockopt(IPV6_TRANSPARENT)";
  else if (bind(fd, (struct sockaddr*)&ep.addr, ep.len) != 0) call = "bind";
  else if (listen(fd, (int)backlog) != 0) call = "listen";
  if (call != NULL) {
    err = errno;
    close(fd);
    return throw_sys_error(env, what, call, err);
  }
  napi_value result;
  CHECK(napi_create_int32(env, fd, &result));
  return result;
}

/* connectMarked: the work done on the threadpool. */
typedef struct {
  endpoint ep;
  uint32_t mark;
  int timeout_ms;
  int fd;
  int err;
  const char* call; /* the failed call, for the message */
  int timed_out;
  napi_deferred deferred;
  napi_async_work work;
} connect_job;

/* A job whose promise or work could not be set up or queued: its work handle deleted, and its
 * promise, once made, rejected and returned (else the error thrown). */
static napi_value queue_failed(napi_env env, napi_deferred deferred, napi_value promise, napi_async_work work, const char* message) {
  if (work != NULL) napi_delete_async_work(env, work);
  if (deferred == NULL || promise == NULL) {
    napi_throw_error(env, NULL, message);
    return NULL;
  }
  napi_value msg, error;
  if (napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &msg) != napi_ok || napi_create_error(env, NULL, msg, &error) != napi_ok) {
    napi_get_undefined(env, &error);
  }
  napi_reject_deferred(env, deferred, error);
  return promise;
}

/* A promise for `job` (malloc'd; its deferred and work fields passed in) and its work queued on the
 * threadpool: the promise, or, when a step fails, what queue_failed gives, the job freed. */
static napi_value queue_job(napi_env env, const char* name, napi_async_execute_callback execute, napi_async_complete_callback complete,
                            void* job, napi_deferred* deferred, napi_async_work* work, const char* failure) {
  napi_value promise = NULL, resource;
  if (napi_create_promise(env, deferred, &promise) != napi_ok ||
      napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &resource) != napi_ok ||
      napi_create_async_work(env, NULL, resource, execute, complete, job, work) != napi_ok ||
      napi_queue_async_work(env, *work) != napi_ok) {
    napi_value out = queue_failed(env, *deferred, promise, *work, failure);
    free(job);
    return out;
  }
  return promise;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void connect_execute(napi_env env, void* data) {
  (void)env;
  connect_job* job = (connect_job*)data;
  job->fd = -1;
  int fd = socket(job->ep.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    job->err = errno;
    job->call = "socket";
    return;
  }
  /* The mark first: the SYN must carry it too. */
  if (setsockopt(fd, SOL_SOCKET, SO_MARK, &job->mark, sizeof(job->mark)) != 0) {
    job->err = errno;
    job->call = "setsockopt(SO_MARK)";
    close(fd);
    return;
  }
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one, sizeof(one));
  if (connect(fd, (struct sockaddr*)&job->ep.addr, job->ep.len) != 0 && errno != EINPROGRESS) {
    job->err = errno;
    job->call = "connect";
    close(fd);
    return;
  }
  int64_t deadline = now_ms() + job->timeout_ms;
  for (;;) {
    int64_t left = deadline - now_ms();
    if (left <= 0) {
      job->err = ETIMEDOUT;
      job->call = "connect";
      job->timed_out = 1;
      close(fd);
      return;
    }
    struct pollfd p = {.fd = fd, .events = POLLOUT, .revents = 0};
    int n = poll(&p, 1, (int)left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      job->err = errno;
      job->call = "poll";
      close(fd);
      return;
    }
    if (n == 0) continue; /* the deadline check above ends it */
    int soerr = 0;
    socklen_t len = sizeof(soerr);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0) soerr = errno;
    if (soerr != 0) {
      job->err = soerr;
      job->call = "connect";
      close(fd);
      return;
    }
    job->fd = fd;
    return;
  }
}

static void connect_complete(napi_env env, napi_status status, void* data) {
  connect_job* job = (connect_job*)data;
  if (status != napi_ok) {
    if (job->fd >= 0) close(job->fd);
    napi_value msg, error;
    napi_create_string_utf8(env, "connectMarked was cancelled", NAPI_AUTO_LENGTH, &msg);
    napi_create_error(env, NULL, msg, &error);
    napi_reject_deferred(env, job->deferred, error);
  } else if (job->fd >= 0) {
    napi_value fd;
    if (napi_create_int32(env, job->fd, &fd) == napi_ok) napi_resolve_deferred(env, job->deferred, fd);
    else close(job->fd);
  } else {
    char what[sizeof(job->ep.label) + 32];
    snprintf(what, sizeof(what), "connectMarked %s", job->ep.label);
    char detail[64];
    if (job->timed_out) snprintf(detail, sizeof(detail), "no answer in %d ms", job->timeout_ms);
    napi_value error = make_sys_error(env, what, job->call, job->err, job->timed_out ? detail : NULL);
    napi_reject_deferred(env, job->deferred, error);
  }
  napi_delete_async_work(env, job->work);
  free(job);
}

/* connectMarked(address, port, mark, timeoutMs) */
static napi_value connect_marked(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 4) {
    napi_throw_type_error(env, "ERR_MISSING_ARGS", "connectMarked(address, port, mark, timeoutMs) takes four arguments");
    return NULL;
  }
  char host[INET6_ADDRSTRLEN + 1];
  double port, mark, timeout;
  if (!string_arg(env, argv[0], "address", host, sizeof(host))) return NULL;
  if (!integer_arg(env, argv[1], "port", 1, 65535, &port)) return NULL;
  if (!integer_arg(env, argv[2], "mark", 0, 4294967295.0, &mark)) return NULL;
  if (!integer_arg(env, argv[3], "timeoutMs", 1, 2147483647.0, &timeout)) return NULL;
  connect_job* job = (connect_job*)calloc(1, sizeof(connect_job));
  if (job == NULL) {
    napi_throw_error(env, "ENOMEM", "connectMarked: out of memory");
    return NULL;
  }
  if (!parse_literal(env, host, (int)port, &job->ep)) {
    free(job);
    return NULL;
  }
  job->mark = (uint32_t)mark;
  job->timeout_ms = (int)timeout;
  job->fd = -1;
  return queue_job(env, "gateway_tproxy.connectMarked", connect_execute, connect_complete, job, &job->deferred, &job->work,
                   "connectMarked: could not queue the connect");
}

/* setBatchPolicy(): SCHED_BATCH for the calling thread only. Allowed without privileges: it gives
 * up nothing but wake-up preemption. */
static napi_value set_batch_policy(napi_env env, napi_callback_info info) {
  (void)info;
  struct sched_param param;
  memset(&param, 0, sizeof(param));
  /* pthread_setschedparam rather than sched_setscheduler(0, ...): musl's sched_setscheduler is a stub (ENOSYS). */
  int err = pthread_setschedparam(pthread_self(), SCHED_BATCH, &param);
  if (err != 0) return throw_sys_error(env, "setBatchPolicy", "pthread_setschedparam", err);
  return NULL;
}

/* trimMemory(): malloc_trim(0) off the main thread. glibc keeps what a program frees for its next
 * allocations and gives back only the top of the main heap above M_TRIM_THRESHOLD; the free chunks
 * inside the heap (and the other arenas') keep their pages. malloc_trim(0) walks every arena and
 * madvises the whole pages of each free chunk away. It takes each arena's lock in turn, so a thread
 * allocating in that arena waits for that arena's walk only. */
typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  int result; /* 1 released, 0 nothing, -1 unsupported */
} trim_job;

static void trim_execute(napi_env env, void* data) {
  (void)env;
  trim_job* job = (trim_job*)data;
#if defined(__GLIBC__)
  job->result = malloc_trim(0) ? 1 : 0;
#else
  job->result = -1;
#endif
}

static void trim_complete(napi_env env, napi_status status, void* data) {
  trim_job* job = (trim_job*)data;
  napi_value value;
  if (status != napi_ok) {
    napi_value msg, error;
    napi_create_string_utf8(env, "trimMemory was cancelled", NAPI_AUTO_LENGTH, &msg);
    napi_create_error(env, NULL, msg, &error);
    napi_reject_deferred(env, job->deferred, error);
  } else {
    if (job->result < 0) napi_get_null(env, &value);
    else napi_get_boolean(env, job->result == 1, &value);
    napi_resolve_deferred(env, job->deferred, value);
  }
  napi_delete_async_work(env, job->work);
  free(job);
}

static napi_value trim_memory(napi_env env, napi_callback_info info) {
  (void)info;
  trim_job* job = (trim_job*)calloc(1, sizeof(trim_job));
  if (job == NULL) {
    napi_throw_error(env, "ENOMEM", "trimMemory: out of memory");
    return NULL;
  }
  return queue_job(env, "gateway_trim_memory", trim_execute, trim_complete, job, &job->deferred, &job->work,
                   "trimMemory: could not queue the trim");
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"listenTransparent", NULL, listen_transparent, NULL, NULL, NULL, napi_enumerable, NULL},
      {"connectMarked", NULL, connect_marked, NULL, NULL, NULL, napi_enumerable, NULL},
      {"setBatchPolicy", NULL, set_batch_policy, NULL, NULL, NULL, napi_enumerable, NULL},
      {"trimMemory", NULL, trim_memory, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  CHECK(napi_define_properties(env, exports, sizeof(props) / sizeof(props[0]), props));
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
