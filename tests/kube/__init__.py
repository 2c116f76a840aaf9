"""Tests of controller.kube, controller.runtime.log and controller.runtime.metrics."""
