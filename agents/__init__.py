"""Agents: the agent protocol, the toolbox, baselines and the LLM agent."""
