package natsbridge_test

const childEnv = "NATSBRIDGE_TEST_CHILD"

func runChild(role string) int { return 2 }
