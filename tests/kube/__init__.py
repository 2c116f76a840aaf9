"""Tests of controller.kube, controller.log and controller.metrics."""
