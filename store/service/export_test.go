package service

// LaneOf exposes laneOf to the tests.
var LaneOf = laneOf
