#!/bin/sh
sort -n
