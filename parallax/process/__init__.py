"""The process protocol: what the launcher and the processes it starts say to each other (protocol: the PARALLAX_*
variables and control lines, the role), what a started process tells its launcher (role), the hosts and slots of a
job (resource_spec), ports and the bind shim, and running a script in a one-process role (script_roles). Plain
Python: no TensorFlow."""
