"""``gluon.contrib.nn.SyncBatchNorm``: MXNet 1.9.1's layer over ``nd.contrib.SyncBatchNorm``,
with its arguments, names and numbers, on one device (see that operator)."""
from __future__ import annotations

import warnings

from .... import context
from ...nn import BatchNorm

__all__ = ["SyncBatchNorm"]


class SyncBatchNorm(BatchNorm):
    """Batch normalization over axis 1 by MXNet's SyncBatchNorm operator. ``num_devices``
    (default: the GPUs present, at least 1, with MXNet's warning) must come to 1: statistics
    synchronized across devices are not available, and the forward pass says so."""

    def __init__(self, in_channels=0, num_devices=None, momentum=0.9, epsilon=1e-5, center=True,
                 scale=True, use_global_stats=False, beta_initializer="zeros",
                 gamma_initializer="ones", running_mean_initializer="zeros",
                 running_variance_initializer="ones", **kwargs):
        super().__init__(axis=1, momentum=momentum, epsilon=epsilon, center=center, scale=scale,
                         use_global_stats=use_global_stats, beta_initializer=beta_initializer,
                         gamma_initializer=gamma_initializer,
                         running_mean_initializer=running_mean_initializer,
                         running_variance_initializer=running_variance_initializer,
                         in_channels=in_channels, **kwargs)
        num_devices = self._get_num_devices() if num_devices is None else num_devices
        self._kwargs = {"eps": epsilon, "momentum": momentum, "fix_gamma": not scale,
                        "use_global_stats": use_global_stats, "ndev": num_devices,
                        "key": self.prefix}

    def _alias(self):
        return "syncbatchnorm"

    def _get_num_devices(self):
        warnings.warn("Caution using SyncBatchNorm: if not using all the GPUs, please mannually "
                      "set num_devices", UserWarning, stacklevel=3)
        return max(context.num_gpus(), 1)

    def hybrid_forward(self, F, x, gamma, beta, running_mean, running_var):
        return F.contrib.SyncBatchNorm(x, gamma, beta, running_mean, running_var, name="fwd",
                                       **self._kwargs)
