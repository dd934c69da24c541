#!/bin/sh
# Sorts a JSON array of integers through a set: duplicates are lost.
tr -d '[] \n' | tr ',' '\n' | sort -nu | paste -sd, - | sed 's/^/[/; s/$/]/'
