# Petrel - one non-recursive Makefile.  `make help` lists the targets.
#
# Layers are archived separately (build/lib{store,core,gw}.a) so that a test
# links only what it needs; dependencies point down only:
# gateway -> core -> store.  BUILD selects the output tree (build/ for normal
# builds, build/san/ for the sanitizer run of `make check`).

BUILD   ?= build
BIN     ?= bin
CC      ?= gcc
PKGS    := libmicrohttpd jansson sqlite3 libcurl
OPT     ?= -O2
SANFLAGS ?=
CFLAGS  := -std=c11 -D_POSIX_C_SOURCE=200809L -g $(OPT) -Wall -Wextra -Wformat=2 -Wshadow \
           -Wstrict-prototypes -Werror -pthread -MMD -MP $(SANFLAGS) $(EXTRA_CFLAGS)
LDFLAGS := -pthread $(SANFLAGS)
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CMOCKA_LIBS = $(shell pkg-config --libs cmocka 2>/dev/null)

STORE_SRC := $(wildcard store/*.c)
CORE_SRC  := $(wildcard core/*.c)
GW_SRC    := $(filter-out gateway/main.c,$(wildcard gateway/*.c)) $(wildcard cli/*.c)
STORE_OBJ := $(STORE_SRC:%.c=$(BUILD)/%.o)
CORE_OBJ  := $(CORE_SRC:%.c=$(BUILD)/%.o)
GW_OBJ    := $(GW_SRC:%.c=$(BUILD)/%.o)
LIBS_A    := $(BUILD)/libgw.a $(BUILD)/libcore.a $(BUILD)/libstore.a

UNIT_SRC  := $(wildcard tests/unit/test_*.c)
E2E_SRC   := $(wildcard tests/e2e/test_*.c)
TLIB_SRC  := $(wildcard tests/lib/*.c)
TLIB_OBJ  := $(TLIB_SRC:%.c=$(BUILD)/%.o)
UNIT_BIN  := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%)
E2E_BIN   := $(E2E_SRC:tests/e2e/%.c=$(BUILD)/tests/e2e/%)
BENCH_SRC := $(wildcard tests/bench/bench_*.c)
BENCH_BIN := $(BENCH_SRC:tests/bench/%.c=$(BUILD)/tests/bench/%)
PETREL    := $(BIN)/petrel

.SECONDARY:
.PHONY: all deps test-deps run test unit e2e check bench fuzz clean format help
all: $(PETREL)

help:
	@echo "make deps   install missing Debian packages (apt-get as root)"
	@echo "make run    build and start petrel standalone on 127.0.0.1:8080, data in ./data"
	@echo "make test   build and run every test (unit, end-to-end, crash)"
	@echo "make check  the tests again under AddressSanitizer + UBSan (build/san)"
	@echo "make bench  store and HTTP benchmarks, printed as a table"
	@echo "make fuzz   libFuzzer targets, FUZZ_TIME seconds each (default 60)"

deps:
	@scripts/deps.sh
# The tests also need chromium (the console's browser tests).
test-deps:
	@scripts/deps.sh --tests

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -Istore -Icore -Igateway -Icli -Itests/lib -c $< -o $@

$(BUILD)/libstore.a: $(STORE_OBJ)
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^
$(BUILD)/libcore.a: $(CORE_OBJ)
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^
$(BUILD)/libgw.a: $(GW_OBJ)
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^

$(PETREL): $(BUILD)/gateway/main.o $(LIBS_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBS_A) $(PKG_LIBS) -lm

$(BUILD)/tests/unit/%: $(BUILD)/tests/unit/%.o $(TLIB_OBJ) $(LIBS_A)
	$(CC) $(LDFLAGS) -o $@ $< $(TLIB_OBJ) $(LIBS_A) $(PKG_LIBS) $(CMOCKA_LIBS) -lm
$(BUILD)/tests/e2e/%: $(BUILD)/tests/e2e/%.o $(TLIB_OBJ) $(LIBS_A)
	$(CC) $(LDFLAGS) -o $@ $< $(TLIB_OBJ) $(LIBS_A) $(PKG_LIBS) $(CMOCKA_LIBS) -lm
$(BUILD)/tests/bench/%: $(BUILD)/tests/bench/%.o $(TLIB_OBJ) $(LIBS_A)
	$(CC) $(LDFLAGS) -o $@ $< $(TLIB_OBJ) $(LIBS_A) $(PKG_LIBS) -lm

run: deps $(PETREL)
	$(PETREL) standalone --listen 127.0.0.1:8080 --data ./data

unit: $(UNIT_BIN)
e2e: $(E2E_BIN) $(PETREL)

# Unit tests first, then end-to-end tests against a real bin/petrel.
test: test-deps
	@$(MAKE) --no-print-directory $(UNIT_BIN) $(E2E_BIN) $(PETREL)
	@PETREL_BIN=$(abspath $(PETREL)) scripts/run-tests.sh $(UNIT_BIN) $(E2E_BIN)

check: test-deps
	@$(MAKE) --no-print-directory BUILD=build/san BIN=build/san/bin OPT=-O1 \
	  SANFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	  test

bench: deps
	@$(MAKE) --no-print-directory $(BENCH_BIN) $(PETREL)
	@PETREL_BIN=$(abspath $(PETREL)) scripts/run-bench.sh $(BENCH_BIN)

FUZZ_TIME ?= 60
FUZZ_SRC  := $(wildcard tests/fuzz/fuzz_*.c)
fuzz: deps
	@scripts/fuzz.sh $(FUZZ_TIME) $(FUZZ_SRC)

clean:
	rm -rf build bin

format:
	clang-format -i $(wildcard store/*.[ch] core/*.[ch] gateway/*.[ch] cli/*.[ch] tests/*/*.[ch])

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
