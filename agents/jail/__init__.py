"""The OS sandbox (bubblewrap) of everything openbell runs and did not write: a model's strategy
code (`python_jail`) and launched agent commands (`command_jail`), both built on one command
line (`bwrap`) and started and ended the same way (`process`)."""
