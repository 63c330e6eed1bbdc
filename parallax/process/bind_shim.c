/* LD_PRELOAD shim: no process of a parallax job listens on a wildcard address. TensorFlow's gRPC server always
 * binds 0.0.0.0/[::] (grpc_server_lib.cc hard-codes it), and Open MPI's out-of-band and TCP transports bind the
 * wildcard whatever their *_if_include says; neither can be told otherwise.
 *
 * - PARALLAX_BIND_MAP ("port=ipv4,..."): a wildcard bind of one of these ports (a TF server's) binds that address.
 *   The process starting a TF server sets it to its own server's entry (getenv reads it at each bind).
 * - PARALLAX_BIND_HOSTS ("ipv4,..."): any other wildcard bind binds the first of these that is an address of this
 *   machine (the job's address for this host), with the port asked for.
 * - listen() on a socket that was never bound (the kernel would pick the wildcard) binds that address first.
 * - The job's addresses are IPv4: a wildcard bind of an IPv6-only socket binds [::1], reachable from this host only.
 * - A wildcard that cannot be mapped (no address of this host listed) fails with EADDRNOTAVAIL and a line on
 *   stderr: nothing listens more widely than the job asked for.
 * Binds to a specific address, and sockets other than IPv4/IPv6, are left untouched. Built by setup.py. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);
typedef int (*listen_fn)(int, int);

static bind_fn real_bind_fn(void) {
    static bind_fn fn;
    if (!fn) fn = (bind_fn)dlsym(RTLD_NEXT, "bind");
    return fn;
}

/* The next comma-separated item of *list into item (NUL-terminated); 0 at the end. */
static int next_item(const char **list, char *item, size_t size) {
    while (*list && **list) {
        const char *end = strchr(*list, ',');
        size_t len = end ? (size_t)(end - *list) : strlen(*list);
        const char *start = *list;
        *list = end ? end + 1 : NULL;
        if (len > 0 && len < size) {
            memcpy(item, start, len);
            item[len] = '\0';
            return 1;
        }
    }
    return 0;
}

static int mapped_port_address(unsigned short port, struct in_addr *out) {
    const char *map = getenv("PARALLAX_BIND_MAP");
    char item[64];
    while (next_item(&map, item, sizeof item)) {
        char *eq = strchr(item, '=');
        if (!eq) continue;
        *eq = '\0';
        if (atoi(item) == port && inet_pton(AF_INET, eq + 1, out) == 1) return 1;
    }
    return 0;
}

static int is_local_address(struct in_addr address) {
    int probe = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (probe < 0) return 0;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr = address;
    int ok = real_bind_fn()(probe, (struct sockaddr *)&a, sizeof a) == 0;
    close(probe);
    return ok;
}

/* This host's address in the job: the first PARALLAX_BIND_HOSTS entry that can be bound here. */
static int host_address(struct in_addr *out) {
    const char *hosts = getenv("PARALLAX_BIND_HOSTS");
    char item[64];
    while (next_item(&hosts, item, sizeof item)) {
        if (inet_pton(AF_INET, item, out) == 1 && is_local_address(*out)) return 1;
    }
    return 0;
}

static int address_for(unsigned short port, struct in_addr *out) {
    return (port && mapped_port_address(port, out)) || host_address(out);
}

static int refuse(const char *what) {
    const char *hosts = getenv("PARALLAX_BIND_HOSTS");
    fprintf(stderr, "parallax: refused a %s on a wildcard address (this host's address in the job: none of "
                    "PARALLAX_BIND_HOSTS=%s)\n", what, hosts ? hosts : "(unset)");
    errno = EADDRNOTAVAIL;
    return -1;
}

static int v6_only(int fd) {
    int value = 0;
    socklen_t len = sizeof value;
    return getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &value, &len) == 0 && value;
}

/* Bind fd to `address`:port in fd's own family (IPv4-mapped on a dual-stack IPv6 socket). */
static int bind_to(int fd, int family, struct in_addr address, unsigned short port) {
    if (family == AF_INET) {
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr = address;
        return real_bind_fn()(fd, (struct sockaddr *)&a, sizeof a);
    }
    struct sockaddr_in6 a;
    memset(&a, 0, sizeof a);
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    if (v6_only(fd)) {
        a.sin6_addr = in6addr_loopback;  /* the job's addresses are IPv4: an IPv6-only socket gets this host only */
    } else {
        a.sin6_addr.s6_addr[10] = 0xff;
        a.sin6_addr.s6_addr[11] = 0xff;
        memcpy(&a.sin6_addr.s6_addr[12], &address, 4);
    }
    return real_bind_fn()(fd, (struct sockaddr *)&a, sizeof a);
}

/* 1 when addr is a wildcard IPv4/IPv6 address (its port in *port), else 0. */
static int is_wildcard(const struct sockaddr *addr, socklen_t len, unsigned short *port) {
    if (addr && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in a;
        memcpy(&a, addr, sizeof a);
        *port = ntohs(a.sin_port);
        return a.sin_addr.s_addr == htonl(INADDR_ANY);
    }
    if (addr && addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 a;
        memcpy(&a, addr, sizeof a);
        *port = ntohs(a.sin6_port);
        return IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr);
    }
    return 0;
}

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    unsigned short port;
    if (!is_wildcard(addr, len, &port)) return real_bind_fn()(fd, addr, len);
    struct in_addr target;
    if (!address_for(port, &target)) return refuse("bind");
    return bind_to(fd, addr->sa_family, target, port);
}

int listen(int fd, int backlog) {
    static listen_fn real_listen;
    if (!real_listen) real_listen = (listen_fn)dlsym(RTLD_NEXT, "listen");
    struct sockaddr_storage bound;
    socklen_t len = sizeof bound;
    unsigned short port;
    int bound_ok = getsockname(fd, (struct sockaddr *)&bound, &len) == 0;
    if (bound_ok && is_wildcard((struct sockaddr *)&bound, len, &port)) {
        if (port != 0) return refuse("listen (bound without this shim)");
        struct in_addr target;  /* never bound: the kernel would listen on the wildcard */
        if (!host_address(&target)) return refuse("listen");
        if (bind_to(fd, bound.ss_family, target, 0) != 0) return -1;
    }
    return real_listen(fd, backlog);
}
