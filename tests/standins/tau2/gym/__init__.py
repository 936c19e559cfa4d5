"""tau2.gym: AgentGymEnv."""

from .gym_agent import AgentGymEnv

__all__ = ["AgentGymEnv"]
