"""The OpenSSH client as the launcher uses it: batch mode, key-based, with the job's port and key. Imports no
TensorFlow. Nothing here prints keys or environment values: environments travel on stdin, not in command lines."""
import concurrent.futures
import dataclasses
import shlex
import subprocess
from typing import Optional, Tuple

from parallax.errors import LaunchError

CONNECT_TIMEOUT = 5
REMOTE_STOP_TIMEOUT = 15.0


class HostUnreachableError(LaunchError):
    """ssh could not connect to a host."""


class SshAuthenticationError(LaunchError):
    """ssh connected but the host refused the key."""


@dataclasses.dataclass(frozen=True)
class SshSettings:
    port: Optional[int] = None  # default for hosts whose spec line gives none
    identity_file: Optional[str] = None
    extra_options: Tuple[str, ...] = ()  # e.g. a known_hosts file for a test cluster

    def options(self, host=None):
        """ssh options for `host` (a resource_spec.Host): batch mode (never a password prompt), the port from the
        host's spec line or the default, the key, then any extra options."""
        opts = ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT}", "-o", "ServerAliveInterval=5",
                "-o", "ServerAliveCountMax=3"]
        port = self.port_for(host)
        if port:
            opts += ["-p", str(port)]
        if self.identity_file:
            opts += ["-i", self.identity_file, "-o", "IdentitiesOnly=yes"]
        return opts + list(self.extra_options)

    def port_for(self, host):
        return (host.ssh_port if host is not None and host.ssh_port else None) or self.port


def command(settings, host, argv):
    """The local argv that runs `argv` on `host` (each word quoted for the remote shell)."""
    return ["ssh", *settings.options(host), host.ssh_target, "--", " ".join(shlex.quote(a) for a in argv)]


def run(settings, host, argv, timeout=30, stdin_text=None):
    """Run `argv` on `host`; returns its stdout. Raises HostUnreachableError / SshAuthenticationError / LaunchError
    with ssh's own words when it fails."""
    try:
        result = subprocess.run(command(settings, host, argv), input=stdin_text, capture_output=True, text=True,
                                timeout=timeout, stdin=None if stdin_text is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise HostUnreachableError(f"{host.hostname}: no answer over ssh within {timeout} s") from None
    except FileNotFoundError:
        raise LaunchError("the OpenSSH client `ssh` is not on PATH; install it (apt-get install openssh-client)") \
            from None
    if result.returncode != 0:
        raise failure(settings, host, result.returncode, result.stderr, argv)
    return result.stdout


def failure(settings, host, code, stderr, argv=()):
    """The error for an ssh command that exited with `code`, classified from ssh's stderr."""
    text = " ".join(stderr.split())[-600:] or "(no message)"
    if code == 255:
        if any(s in stderr for s in ("Permission denied", "Too many authentication failures",
                                     "Host key verification failed", "no matching host key")):
            key = settings.identity_file or "your default ssh keys"
            return SshAuthenticationError(
                f"{host.ssh_target}: ssh authentication failed with {key}: {text}. Put the public key in "
                f"~/.ssh/authorized_keys on {host.hostname} (and its host key in known_hosts), or pass the right "
                f"--ssh-identity-file")
        port = settings.port_for(host)
        return HostUnreachableError(f"{host.ssh_target}: cannot reach the host over ssh (port {port or 22}): {text}")
    if code == 127 or "No such file or directory" in stderr:
        return LaunchError(f"{host.hostname}: `{argv[0] if argv else '?'}` is not there: {text}. Install the same "
                           f"Python and parallax at the same path on every host, or pass --python")
    return LaunchError(f"{host.hostname}: `{' '.join(argv[:4])}` failed with exit status {code}: {text}")


def on_remote_hosts(spec, settings, argv_for, timeout=REMOTE_STOP_TIMEOUT):
    """Run `argv_for(host, index)` on every remote host of `spec` over ssh, in parallel; {hostname: stdout or the
    exception}."""
    remote = [(i, h) for i, h in enumerate(spec.hosts) if not h.is_local]
    if not remote:
        return {}
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(32, len(remote))) as pool:
        futures = {pool.submit(run, settings, h, argv_for(h, i), timeout): h.hostname for i, h in remote}
        for future in concurrent.futures.as_completed(futures):
            try:
                results[futures[future]] = future.result()
            except Exception as e:  # noqa: BLE001 - reported by the caller
                results[futures[future]] = e
    return results
