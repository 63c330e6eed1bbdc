"""`parallax.log`: the original Parallax's logger, which its scripts use (`parallax.log.info(...)`): named PARALLAX,
INFO and above to stderr. Made when a script first reads `parallax.log`, not when parallax is imported."""
import logging

log = logging.getLogger("PARALLAX")
if not log.handlers:
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("%(asctime)s PARALLAX %(levelname)s %(message)s"))
    log.addHandler(_handler)
    log.setLevel(logging.INFO)
    log.propagate = False
