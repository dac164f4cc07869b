/* check.h: the test programs' CHECK, shared by mrtest, mrfeat and fiops.
 * CHECK counts a failed condition, says where and why on stderr, and goes
 * on, so one run reports every failure; a program exits nonzero if fails
 * is. Each program keeps its own MUST (fatal), which names errors in its
 * own API's words. */
#ifndef MR_TESTS_CHECK_H
#define MR_TESTS_CHECK_H

#include <stdio.h>

static int fails, checks;

#define CHECK(cond, ...)                                                                                      \
	do {                                                                                                   \
		checks++;                                                                                      \
		if (!(cond)) {                                                                                 \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                  \
			fprintf(stderr, __VA_ARGS__);                                                          \
			fputc('\n', stderr);                                                                   \
			fails++;                                                                               \
		}                                                                                              \
	} while (0)

#endif
