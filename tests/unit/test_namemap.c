/*
 * test_namemap.c - the intrusive name-keyed hash map (core/namemap.c):
 * init arguments, insert/find/remove, growth by doubling with many keys,
 * keys sharing a bucket or a whole hash, the walk (nm_next) and nm_free.
 * Entries embed their node away from offset 0, so NM_ENTRY is exercised.
 */
#include "testutil.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mq.h"
#include "namemap.h"

#define MANY 5000 /* keys of the growth and walk cases */

typedef struct Item {
    int tag;       /* the key's number */
    NmNode node;   /* keyed by 'name' */
    char name[32]; /* "key-<tag>" */
    int seen;      /* walks or frees that reached this item */
} Item;

/* items_new makes 'count' items named key-0 .. key-<count-1>. */
static Item *items_new(int count) {
    Item *items = calloc((size_t)count, sizeof(*items));
    assert_non_null(items);
    for (int i = 0; i < count; i++) {
        items[i].tag = i;
        snprintf(items[i].name, sizeof(items[i].name), "key-%d", i);
        nm_node_init(&items[i].node, items[i].name);
    }
    return items;
}

/* find_item looks 'key' up and returns its item, or NULL. */
static Item *find_item(const NameMap *m, const char *key) {
    NmNode *n = nm_find(m, key, nm_hash(key, strlen(key)));
    return n ? NM_ENTRY(n, Item, node) : NULL;
}

/* map_filled makes 'm' a map of 'nbuckets' buckets holding 'count' new
 * items (returned: the caller frees them after nm_free). */
static Item *map_filled(NameMap *m, size_t nbuckets, int count) {
    assert_int_equal(nm_init(m, nbuckets), MQ_OK);
    Item *items = items_new(count);
    for (int i = 0; i < count; i++) nm_insert(m, &items[i].node);
    return items;
}

/* remove_key removes 'key' and returns its node, or NULL. */
static NmNode *remove_key(NameMap *m, const char *key) {
    return nm_remove(m, key, nm_hash(key, strlen(key)));
}

static size_t next_pow2(size_t n) {
    size_t p = 1;
    while (p < n) p *= 2;
    return p;
}

static void test_nm_init_takes_only_powers_of_two(void **state) {
    (void)state;
    NameMap m;
    assert_int_equal(nm_init(NULL, 64), MQ_ERR_INVAL);
    assert_int_equal(nm_init(&m, 0), MQ_ERR_INVAL);
    assert_int_equal(nm_init(&m, 3), MQ_ERR_INVAL);
    assert_int_equal(nm_init(&m, 96), MQ_ERR_INVAL);
    assert_int_equal(nm_init(&m, 1), MQ_OK);
    assert_int_equal(m.count, 0);
    assert_int_equal(m.nbuckets, 1);
    assert_null(nm_next(&m, NULL));
    assert_null(find_item(&m, "absent"));
    nm_free(&m, NULL);
    assert_null(m.buckets);
    assert_int_equal(m.nbuckets, 0);
    nm_free(NULL, NULL);
}

static void test_nm_insert_find_remove_round_trip(void **state) {
    (void)state;
    NameMap m;
    Item *items = map_filled(&m, 64, 3);
    assert_int_equal(m.count, 3);
    for (int i = 0; i < 3; i++) assert_ptr_equal(find_item(&m, items[i].name), &items[i]);
    assert_null(find_item(&m, "key-3"));
    assert_null(find_item(&m, "key-"));
    assert_null(find_item(&m, ""));

    const char *k = "key-1";
    assert_ptr_equal(remove_key(&m, k), &items[1].node);
    assert_int_equal(m.count, 2);
    assert_null(find_item(&m, k));
    assert_null(remove_key(&m, k));
    assert_int_equal(m.count, 2);
    assert_ptr_equal(find_item(&m, "key-0"), &items[0]);
    assert_ptr_equal(find_item(&m, "key-2"), &items[2]);

    /* a removed node may go back in */
    nm_insert(&m, &items[1].node);
    assert_ptr_equal(find_item(&m, k), &items[1]);
    assert_int_equal(m.count, 3);
    nm_free(&m, NULL);
    free(items);
}

static void test_nm_grows_by_doubling_and_keeps_every_key(void **state) {
    (void)state;
    NameMap m;
    assert_int_equal(nm_init(&m, 1), MQ_OK);
    Item *items = items_new(MANY);
    for (int i = 0; i < MANY; i++) {
        nm_insert(&m, &items[i].node);
        /* load 1: the smallest power of two that holds every key */
        assert_int_equal(m.nbuckets, next_pow2((size_t)i + 1));
    }
    assert_int_equal(m.count, MANY);
    for (int i = 0; i < MANY; i++) assert_ptr_equal(find_item(&m, items[i].name), &items[i]);

    /* remove the even keys: the odd ones stay, the buckets do not shrink */
    size_t nbuckets = m.nbuckets;
    for (int i = 0; i < MANY; i += 2)
        assert_ptr_equal(remove_key(&m, items[i].name), &items[i].node);
    assert_int_equal(m.count, MANY / 2);
    assert_int_equal(m.nbuckets, nbuckets);
    for (int i = 0; i < MANY; i++) {
        if (i % 2 == 0) {
            assert_null(find_item(&m, items[i].name));
        } else {
            assert_ptr_equal(find_item(&m, items[i].name), &items[i]);
        }
    }
    nm_free(&m, NULL);
    free(items);
}

static void test_nm_keys_sharing_a_bucket_stay_apart(void **state) {
    (void)state;
    NameMap m;
    assert_int_equal(nm_init(&m, 64), MQ_OK);
    /* Look for three keys whose hashes share the low six bits. */
    Item *items = items_new(MANY);
    int same[3];
    int found = 0;
    uint64_t slot = items[0].node.hash & 63;
    for (int i = 0; i < MANY && found < 3; i++)
        if ((items[i].node.hash & 63) == slot) same[found++] = i;
    assert_int_equal(found, 3);
    for (int i = 0; i < 3; i++) nm_insert(&m, &items[same[i]].node);
    assert_int_equal(m.nbuckets, 64);
    for (int i = 0; i < 3; i++)
        assert_ptr_equal(find_item(&m, items[same[i]].name), &items[same[i]]);
    /* New nodes go first: unlink the middle of the chain, then its head. */
    for (int i = 1; i <= 2; i++) {
        const char *k = items[same[i]].name;
        assert_ptr_equal(remove_key(&m, k), &items[same[i]].node);
        assert_null(find_item(&m, k));
    }
    assert_ptr_equal(find_item(&m, items[same[0]].name), &items[same[0]]);
    assert_int_equal(m.count, 1);
    nm_free(&m, NULL);
    free(items);
}

static void test_nm_tells_keys_of_one_hash_apart_by_name(void **state) {
    (void)state;
    NameMap m;
    assert_int_equal(nm_init(&m, 4), MQ_OK);
    /* A full 64-bit collision, forced: the map must compare the keys. */
    Item *items = items_new(3);
    const uint64_t h = 0x1234;
    for (int i = 0; i < 3; i++) {
        items[i].node.hash = h;
        nm_insert(&m, &items[i].node);
    }
    for (int i = 0; i < 3; i++)
        assert_ptr_equal(nm_find(&m, items[i].name, h), &items[i].node);
    assert_null(nm_find(&m, "key-9", h));
    assert_null(nm_remove(&m, "key-9", h));
    assert_ptr_equal(nm_remove(&m, "key-1", h), &items[1].node);
    assert_null(nm_find(&m, "key-1", h));
    assert_ptr_equal(nm_find(&m, "key-0", h), &items[0].node);
    assert_ptr_equal(nm_find(&m, "key-2", h), &items[2].node);
    /* the walk still sees both nodes of the shared chain */
    int walked = 0;
    for (NmNode *n = nm_next(&m, NULL); n; n = nm_next(&m, n)) walked++;
    assert_int_equal(walked, 2);
    nm_free(&m, NULL);
    free(items);
}

static void test_nm_next_visits_every_node_once(void **state) {
    (void)state;
    NameMap m;
    Item *items = map_filled(&m, 8, MANY);
    size_t walked = 0;
    for (NmNode *n = nm_next(&m, NULL); n; n = nm_next(&m, n)) {
        NM_ENTRY(n, Item, node)->seen++;
        walked++;
    }
    assert_int_equal(walked, MANY);
    for (int i = 0; i < MANY; i++) assert_int_equal(items[i].seen, 1);
    nm_free(&m, NULL);
    free(items);
}

static void count_free(NmNode *n) {
    Item *it = NM_ENTRY(n, Item, node);
    it->seen++;
    n->next = NULL; /* the map must have read the chain before the call */
}

static void test_nm_free_hands_every_entry_back_once(void **state) {
    (void)state;
    NameMap m;
    Item *items = map_filled(&m, 2, 100);
    nm_free(&m, count_free);
    for (int i = 0; i < 100; i++) assert_int_equal(items[i].seen, 1);
    assert_null(m.buckets);
    assert_int_equal(m.count, 0);
    free(items);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nm_init_takes_only_powers_of_two),
        cmocka_unit_test(test_nm_insert_find_remove_round_trip),
        cmocka_unit_test(test_nm_grows_by_doubling_and_keeps_every_key),
        cmocka_unit_test(test_nm_keys_sharing_a_bucket_stay_apart),
        cmocka_unit_test(test_nm_tells_keys_of_one_hash_apart_by_name),
        cmocka_unit_test(test_nm_next_visits_every_node_once),
        cmocka_unit_test(test_nm_free_hands_every_entry_back_once),
    };
    return cmocka_run_group_tests_name("namemap", tests, NULL, NULL);
}
