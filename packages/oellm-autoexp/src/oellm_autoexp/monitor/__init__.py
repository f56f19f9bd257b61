"""Monitoring: SLURM state, log/output activity and log signals -> modes -> restart policies."""

from oellm_autoexp.monitor.controller import Action, MonitorController, PollReport
from oellm_autoexp.monitor.states import Mode, MonitorState

__all__ = ["Action", "Mode", "MonitorController", "MonitorState", "PollReport"]
