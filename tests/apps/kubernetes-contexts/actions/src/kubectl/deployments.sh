#!/usr/bin/env sh
set -e
kubectl get deployments -A
