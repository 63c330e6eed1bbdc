"""mpirun's remote-shell agent (`plm_rsh_agent`) for jobs with remote hosts: ssh with the job's settings that also
preloads the bind shim into the orted daemon it starts, so that the daemon and the ranks it forks listen on their
host's job address only (bind_shim.py). Open MPI calls it as `<agent> <host> <orted command words...>`; the ssh
options and the shim's environment come in ENV_AGENT (JSON), set by the launcher in mpirun's environment. Imports
no TensorFlow.
"""
import json
import os
import shlex
import sys

ENV_AGENT = "PARALLAX_RSH_AGENT"


def agent_environment(ssh_options, shim_env):
    """mpirun's environment entry for this agent: the ssh options and the variables the daemons need."""
    return {ENV_AGENT: json.dumps({"ssh": list(ssh_options), "env": dict(shim_env)})}


def remote_command(words, env):
    """The remote shell command: export the shim's variables, then the daemon command Open MPI gave (its words
    joined with spaces, as ssh itself would join them)."""
    exports = "".join(f"export {name}={shlex.quote(value)}; " for name, value in sorted(env.items()))
    return exports + " ".join(words)


def main(argv):
    if len(argv) < 2:
        print("usage: python -m parallax.launcher.rsh_agent HOST COMMAND...", file=sys.stderr)
        return 2
    settings = json.loads(os.environ.get(ENV_AGENT, "{}"))
    host, words = argv[0], argv[1:]
    os.execvp("ssh", ["ssh", *settings.get("ssh", []), host, remote_command(words, settings.get("env", {}))])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
