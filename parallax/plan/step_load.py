"""The load one step puts on the hosts (cost_model.predict adds each method's share): each host link's traffic per
phase and direction, each host's CPU and server bytes, and the critical path's own CPU and message rounds. Imports
no TensorFlow."""


PHASES = ("push", "pull")  # a step's traffic before the servers' update (gradients, collectives), and after it


class StepLoad:
    """What one step of a plan puts on each host, as the cost model's terms add it up."""

    def __init__(self, hosts):
        self.out, self.into = [0.0] * hosts, [0.0] * hosts
        # per phase and host: seconds of its link's outgoing and incoming traffic
        self.out_seconds = {phase: [0.0] * hosts for phase in PHASES}
        self.into_seconds = {phase: [0.0] * hosts for phase in PHASES}
        self.cpu = [0.0] * hosts
        self.server = [0.0] * hosts
        self.worker_cpu = 0.0  # communication CPU of one worker (the busiest), on the critical path
        self.waits = 0.0  # seconds of message rounds on the critical path

    def send(self, src, dst, nbytes, bandwidth, phase="push"):
        if src != dst:
            self.out[src] += nbytes
            self.into[dst] += nbytes
            self.out_seconds[phase][src] += nbytes / bandwidth
            self.into_seconds[phase][dst] += nbytes / bandwidth

    def link_seconds(self, burst_seconds=0.0):
        """The phases follow each other (the pulls wait for the update the pushes feed), so each phase takes its
        busiest link direction: a server whose variables are larger than the other's sends its pulls while the
        other direction idles, which the step's total bytes per direction would hide. Each direction's burst
        (`burst_seconds` of its traffic that passes at once) goes to its first traffic of the step."""
        left = {}
        total = 0.0
        for phase in PHASES:
            busiest = 0.0
            for direction, per_host in (("out", self.out_seconds[phase]), ("in", self.into_seconds[phase])):
                for h, seconds in enumerate(per_host):
                    key = (direction, h)
                    spent = min(left.setdefault(key, burst_seconds), seconds)
                    left[key] -= spent
                    busiest = max(busiest, seconds - spent)
            total += busiest
        return total
