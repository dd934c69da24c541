#!/bin/sh
# Sorts a JSON array of integers, keeping duplicates.
tr -d '[] \n' | tr ',' '\n' | sort -n | paste -sd, - | sed 's/^/[/; s/$/]/'
