package main

import "github.com/socklb/socklb/bench/schema"

// The raw file's types, as socklb-bench writes them.
type (
	Run         = schema.Run
	MapMem      = schema.MapMem
	Churn       = schema.Churn
	HookCost    = schema.HookCost
	HookCall    = schema.HookCall
	Profile     = schema.Profile
	Results     = schema.Results
	ExternalRun = schema.ExternalRun
	Capacity    = schema.Capacity
)
