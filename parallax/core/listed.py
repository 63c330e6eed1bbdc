"""A value a rule lists instead of making it one device's: what it is and why. It prints, and compares, as the
sentence "what (why)" the warnings and `parallax.explain` show, so a list of them reads as before; code reads its
two fields, never the sentence."""
from typing import Optional


class Listed(str):
    """`Listed(what, why)`: `what` names the value (a tensor, a state, an op and the node in it), `why` says why
    parallax cannot make it one device's. A sentence given whole (a plan built by hand) is `what`, with no `why`."""
    _fields = ("what", "why")
    __annotations__ = {"what": str, "why": Optional[str]}

    def __new__(cls, what, why=None):
        listed = super().__new__(cls, what if why is None else f"{what} ({why})")
        listed.what, listed.why = what, why
        return listed

    def __getnewargs__(self):  # copies and pickles make it again from its fields, not from the sentence
        return self.what, self.why

    def __repr__(self):
        return f"Listed({self.what!r}, {self.why!r})"
