/* LD_PRELOAD shim: TensorFlow's gRPC server always listens on 0.0.0.0 (grpc_server_lib.cc hard-codes it). For
 * the ports named in PARALLAX_BIND_MAP ("port=ipv4,port=ipv4,..."), a bind() to the wildcard address binds to the
 * mapped address instead, so a job's servers listen on their cluster address only. Every other bind() is left
 * untouched. Built by setup.py; used by parallax.launcher.bind_shim. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

static int mapped_address(unsigned short port, struct in_addr *out) {
    const char *map = getenv("PARALLAX_BIND_MAP");
    char item[64];
    while (map && *map) {
        const char *end = strchr(map, ',');
        size_t len = end ? (size_t)(end - map) : strlen(map);
        if (len < sizeof item) {
            memcpy(item, map, len);
            item[len] = '\0';
            char *eq = strchr(item, '=');
            if (eq) {
                *eq = '\0';
                if (atoi(item) == port && inet_pton(AF_INET, eq + 1, out) == 1) return 1;
            }
        }
        map = end ? end + 1 : NULL;
    }
    return 0;
}

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    static bind_fn real_bind;
    if (!real_bind) real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
    struct in_addr target;
    if (addr && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in a;
        memcpy(&a, addr, sizeof a);
        if (a.sin_addr.s_addr == htonl(INADDR_ANY) && mapped_address(ntohs(a.sin_port), &target)) {
            a.sin_addr = target;
            return real_bind(fd, (struct sockaddr *)&a, sizeof a);
        }
    } else if (addr && addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 a;
        memcpy(&a, addr, sizeof a);
        if (IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr) && mapped_address(ntohs(a.sin6_port), &target)) {
            /* gRPC listens on a dual-stack socket: bind it to the IPv4-mapped form of the address. */
            memset(&a.sin6_addr, 0, sizeof a.sin6_addr);
            a.sin6_addr.s6_addr[10] = 0xff;
            a.sin6_addr.s6_addr[11] = 0xff;
            memcpy(&a.sin6_addr.s6_addr[12], &target, 4);
            return real_bind(fd, (struct sockaddr *)&a, sizeof a);
        }
    }
    return real_bind(fd, addr, len);
}
