// Browser tests of the web console (web/): a real broker, headless chromium.
// Run from the repo root: node --test tests/browser/
// Env: PETREL_BIN (default bin/petrel), TEST_OUTPUT_DIR (default
// build/test-output/console: screenshots and timings.json), CHROMIUM.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { OUT, startBroker, rest, pool, until, sleep, launchBrowser, openPage, go } from './harness.mjs';

let broker;
let browser;
let B;
const fx = {};

const r = (method, p, body) => rest(B, method, p, body);

async function ok(method, p, body) {
  const res = await r(method, p, body);
  assert.ok(res.status >= 200 && res.status < 300, method + ' ' + p + ' -> ' + res.status + ' ' + JSON.stringify(res.data));
  return res.data;
}

async function receiveAll(group, topic, want) {
  const handles = [];
  await until(async () => {
    const got = await ok('POST', '/v1/groups/' + group + '/receive', { topic, maxMessages: want - handles.length, waitMs: 0 });
    for (const m of got.messages) handles.push(m.receiptHandle);
    return handles.length >= want;
  }, 5000, 'receive ' + want + ' from ' + topic);
  return handles;
}

async function consume(group, topic, n) {
  const handles = await receiveAll(group, topic, n);
  const res = await ok('POST', '/v1/groups/' + group + '/ack', { topic, receiptHandles: handles });
  assert.ok(res.results.every(x => x.status === 'OK'), JSON.stringify(res));
}

before(async () => {
  mkdirSync(OUT, { recursive: true });
  broker = await startBroker();
  B = broker.base;
  browser = await launchBrowser();
  // Fixture data so that every page has something to show.
  await ok('PUT', '/v1/topics/Orders', { queues: 4 });
  await ok('PUT', '/v1/groups/OrderWorkers', { retryMaxTimes: 3 });
  for (let i = 0; i < 6; i++) {
    const s = await ok('POST', '/v1/topics/Orders/messages', {
      body: JSON.stringify({ order: i, item: 'book <b>' + i + '</b>' }), tags: 'Created', keys: ['order-' + i],
      properties: { region: 'eu' } });
    if (i === 0) fx.msgId = s.msgId;
  }
  await consume('OrderWorkers', 'Orders', 2);
  await ok('POST', '/v1/groups/OrderWorkers/consumers/worker-1@host-a/heartbeat',
    { subscriptions: [{ topic: 'Orders', expression: 'Created || Paid' }], strategy: 'AVG' });
  await ok('POST', '/v1/topics/Orders/messages', { body: 'later', delayLevel: 3 });
  // a half message (its check-back target does not answer: it stays pending)
  await ok('POST', '/v1/topics/Orders/transactions', { body: 'half', checkUrl: 'http://127.0.0.1:9/check' });
});

after(async () => {
  if (browser) await browser.close();
  // A broker that died under the test (a crash, a sanitizer report) says why.
  if (broker && broker.exited()) console.log('# the broker exited early; its log:\n' + broker.log());
  if (broker) await broker.stop();
});

const PAGES = () => [
  ['dashboard', '#/', 'dashboard'],
  ['topics', '#/topics', 'topics'],
  ['topic', '#/topics/Orders', 'topic'],
  ['groups', '#/groups', 'groups'],
  ['group', '#/groups/OrderWorkers', 'group'],
  ['messages', '#/messages?topic=Orders&key=order-1', 'messages'],
  ['message', '#/messages/' + fx.msgId, 'message'],
  ['transactions', '#/transactions', 'transactions'],
];

test('every page loads without console errors, warnings or page errors', async () => {
  const { page, problems } = await openPage(browser.ctx, B);
  try {
    for (const [file, hash, name] of PAGES()) {
      await go(page, hash, name);
      const errors = await page.locator('.error').allTextContents();
      assert.deepEqual(errors, [], name + ' shows errors');
      assert.ok(await page.locator('main h1').count() >= 1, name + ' has a heading');
      if (name === 'dashboard') await page.waitForSelector('#rate-chart svg polyline');
      await page.screenshot({ path: path.join(OUT, file + '-1280.png'), fullPage: true });
    }
    // A few of the pages' contents.
    await go(page, '#/topics/Orders', 'topic');
    assert.equal(await page.locator('section:has(#q-h) tbody tr').count(), 4);
    assert.match(await page.locator('section:has(#grp-h)').innerText(), /OrderWorkers\s+4\s+0\s+1/);
    await go(page, '#/groups/OrderWorkers', 'group');
    assert.match(await page.locator('section:has(#cons-h) tbody').innerText(), /worker-1@host-a\s+PULL\s+AVG\s+Orders/);
    await go(page, '#/messages/' + fx.msgId, 'message');
    // The body holds markup; it must be shown as text, not parsed.
    assert.match(await page.locator('#msg-body').innerText(), /book <b>0<\/b>/);
    assert.equal(await page.locator('#msg-body b').count(), 0);
    await go(page, '#/transactions', 'transactions');
    assert.match(await page.locator('section:has(#dl-h)').innerText(), /10s\s+1/);
    assert.equal(await page.locator('section:has(#tx-h) tbody tr').count(), 1);
    assert.deepEqual(problems, []);
  } finally {
    await page.close();
  }
});

test('narrow width (375 px): no page overflows horizontally', async () => {
  const { page, problems } = await openPage(browser.ctx, B);
  try {
    await page.setViewportSize({ width: 375, height: 740 });
    for (const [file, hash, name] of PAGES()) {
      await go(page, hash, name);
      const w = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(w <= 376, name + ': scrollWidth ' + w + ' > 375');
      await page.screenshot({ path: path.join(OUT, file + '-375.png'), fullPage: true });
    }
    assert.deepEqual(problems, []);
  } finally {
    await page.close();
  }
});

test('create a topic and a group through the forms; delete needs confirmation', async () => {
  const { page, problems } = await openPage(browser.ctx, B);
  try {
    await go(page, '#/topics', 'topics');
    await page.click('#new-topic');
    await page.fill('#tf-name', 'FormTopic');
    await page.fill('#tf-queues', '3');
    await page.selectOption('#tf-perm', 'RW');
    await page.check('#tf-order');
    await page.click('#topic-form button[type=submit]');
    await page.waitForSelector('#form-dialog', { state: 'hidden' });
    const t = await ok('GET', '/v1/topics/FormTopic');
    assert.equal(t.readQueues, 3);
    assert.equal(t.writeQueues, 3);
    assert.equal(t.order, true);
    await page.waitForSelector('#topics-table a[href="#/topics/FormTopic"]');

    // search filters the rows already loaded
    await page.fill('#topic-search', 'formtop');
    assert.equal(await page.locator('#topics-table tbody tr').count(), 1);
    await page.fill('#topic-search', '');

    // edit: 3 -> 5 queues
    await page.click('#topics-table button[data-act=edit][data-name="FormTopic"]');
    assert.equal(await page.inputValue('#tf-name'), 'FormTopic');
    await page.fill('#tf-queues', '5');
    await page.click('#topic-form button[type=submit]');
    await page.waitForSelector('#form-dialog', { state: 'hidden' });
    assert.equal((await ok('GET', '/v1/topics/FormTopic')).writeQueues, 5);

    // the topic page's own Edit (5 -> 6 queues) and Refresh
    await go(page, '#/topics/FormTopic', 'topic');
    await page.click('#topic-edit');
    await page.fill('#tf-queues', '6');
    await page.click('#topic-form button[type=submit]');
    await page.waitForSelector('#form-dialog', { state: 'hidden' });
    assert.equal((await ok('GET', '/v1/topics/FormTopic')).writeQueues, 6);
    await page.evaluate(() => { delete document.body.dataset.rendered; });
    await page.click('#topic-refresh');
    await page.waitForFunction(() => document.body.dataset.rendered === 'topic');
    assert.equal(await page.locator('#view .error, #view [role=alert]:not(:empty)').count(), 0);

    await go(page, '#/groups', 'groups');
    await page.click('#new-group');
    await page.fill('#gf-name', 'FormGroup');
    await page.fill('#gf-retry', '5');
    await page.check('#gf-orderly');
    await page.click('#group-form button[type=submit]');
    await page.waitForSelector('#form-dialog', { state: 'hidden' });
    const g = await ok('GET', '/v1/groups/FormGroup');
    assert.equal(g.retryMaxTimes, 5);
    assert.equal(g.orderly, true);
    await page.waitForSelector('#groups-table a[href="#/groups/FormGroup"]');

    // delete a topic: cancel keeps it, confirm removes it
    await ok('PUT', '/v1/topics/DoomedTopic', {});
    await go(page, '#/topics', 'topics');
    const del = '#topics-table button[data-act=delete][data-name="DoomedTopic"]';
    await page.click(del);
    await page.waitForSelector('#confirm-dialog[open]');
    await page.click('#confirm-cancel');
    assert.equal((await r('GET', '/v1/topics/DoomedTopic')).status, 200);
    await page.click(del);
    await page.click('#confirm-ok');
    await until(async () => (await r('GET', '/v1/topics/DoomedTopic')).status === 404, 3000, 'topic deleted');
    await page.waitForSelector(del, { state: 'detached' });
    assert.deepEqual(problems, []);
  } finally {
    await page.close();
  }
});

test('send a test message from the topic page, then find it by key and by msgId', async () => {
  const { page, problems } = await openPage(browser.ctx, B);
  try {
    await ok('PUT', '/v1/topics/SendTopic', { queues: 2 });
    await go(page, '#/topics/SendTopic', 'topic');
    await page.fill('#sf-body', 'hello from the console');
    await page.fill('#sf-tags', 'TagB');
    await page.fill('#sf-keys', 'browser-key-1, browser-key-2');
    await page.fill('#sf-props', 'color=blue\nsize = 3');
    await page.click('#send-form button[type=submit]');
    const link = page.locator('#send-result a');
    await link.waitFor();
    const msgId = (await link.innerText()).trim();
    assert.match(msgId, /^[0-9A-F]{32}$/);
    const m = await ok('GET', '/v1/messages/' + msgId);
    assert.equal(m.body, 'hello from the console');
    assert.equal(m.tags, 'TagB');
    assert.deepEqual(m.keys, ['browser-key-1', 'browser-key-2']);
    assert.deepEqual(m.properties, { color: 'blue', size: '3' });

    // by key (the index is built a moment after the produce: search again if needed)
    await go(page, '#/messages', 'messages');
    await page.fill('#qk-topic', 'SendTopic');
    await page.fill('#qk-key', 'browser-key-2');
    await until(async () => {
      await page.evaluate(() => { delete document.body.dataset.rendered; });
      await page.click('#q-key button[type=submit]');
      await page.waitForSelector('body[data-rendered="messages"]');
      return (await page.locator('#q-results a[href="#/messages/' + msgId + '"]').count()) === 1;
    }, 5000, 'key search result');

    // by msgId
    await page.fill('#qi-id', msgId);
    await page.evaluate(() => { delete document.body.dataset.rendered; });
    await page.click('#q-id button[type=submit]');
    await page.waitForSelector('body[data-rendered="message"]');
    assert.match(await page.locator('h1').innerText(), new RegExp(msgId));
    assert.equal(await page.locator('#msg-body').innerText(), 'hello from the console');
    const details = await page.locator('section:has(#md-h)').innerText();
    assert.match(details, /TagB/);
    assert.match(details, /browser-key-1, browser-key-2/);
    assert.match(await page.locator('section:has(#mp-h)').innerText(), /color\s+blue/);
    await page.click('#body-hex');
    assert.match(await page.locator('#msg-body').innerText(), /^00000000 {2}68 65 6c 6c 6f/);
    assert.equal(await page.getAttribute('#body-hex', 'aria-pressed'), 'true');
    await page.click('#body-text');
    assert.equal(await page.locator('#msg-body').innerText(), 'hello from the console');
    assert.equal(await page.locator('#msg-resend').count(), 0, 'no resend for a normal topic');
    assert.deepEqual(problems, []);
  } finally {
    await page.close();
  }
});

test('lag appears on the group page and drops after consuming', async () => {
  const { page, problems } = await openPage(browser.ctx, B);
  try {
    await ok('PUT', '/v1/topics/LagTopic', { queues: 2 });
    await ok('PUT', '/v1/groups/LagGroup', {});
    await ok('POST', '/v1/topics/LagTopic/messages', { body: 'first' });
    await consume('LagGroup', 'LagTopic', 1);
    for (let i = 0; i < 4; i++) await ok('POST', '/v1/topics/LagTopic/messages', { body: 'm' + i });

    await go(page, '#/groups/LagGroup', 'group');
    assert.equal((await page.locator('#group-total-lag').innerText()).trim(), '4');
    assert.equal((await page.locator('[data-topic-lag="LagTopic"]').innerText()).trim(), '4');
    await go(page, '#/groups', 'groups');
    await page.fill('#group-search', 'LagGroup');
    assert.match(await page.locator('#groups-table tbody tr').innerText(), /\b4\b/);

    await consume('LagGroup', 'LagTopic', 4);
    await go(page, '#/groups/LagGroup', 'group');
    await page.evaluate(() => { delete document.body.dataset.rendered; });
    await page.click('#group-refresh');
    await page.waitForSelector('body[data-rendered="group"]');
    assert.equal((await page.locator('#group-total-lag').innerText()).trim(), '0');
    assert.deepEqual(problems, []);
  } finally {
    await page.close();
  }
});

test('reset offsets to a time through the group page form', async () => {
  const { page, problems } = await openPage(browser.ctx, B);
  try {
    await ok('PUT', '/v1/topics/ResetTopic', { queues: 1 });
    await ok('PUT', '/v1/groups/ResetGroup', {});
    await ok('POST', '/v1/topics/ResetTopic/messages', { body: 'a' });
    await ok('POST', '/v1/topics/ResetTopic/messages', { body: 'b' });
    const q = await until(async () => {
      const res = await ok('GET', '/v1/topics/ResetTopic/queues');
      return res[0].maxOffset === 2 && res[0].lastUpdateTimestamp ? res : null;
    }, 3000, 'two messages');
    const T = Math.floor(q[0].lastUpdateTimestamp / 1000) * 1000 + 1000;
    while (Date.now() < T + 50) await sleep(50);
    await ok('POST', '/v1/topics/ResetTopic/messages', { body: 'c' });
    await consume('ResetGroup', 'ResetTopic', 3);
    assert.deepEqual(await ok('GET', '/v1/groups/ResetGroup/offsets?topic=ResetTopic'),
      [{ topic: 'ResetTopic', queueId: 0, offset: 3 }]);

    await go(page, '#/groups/ResetGroup', 'group');
    await page.fill('#rf-topic', 'ResetTopic');
    const local = await page.evaluate(t => {
      const d = new Date(t);
      const p = n => String(n).padStart(2, '0');
      return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) + 'T' +
        p(d.getHours()) + ':' + p(d.getMinutes()) + ':' + p(d.getSeconds());
    }, T);
    await page.fill('#rf-time', local);
    await page.click('#reset-form button[type=submit]');
    await page.waitForSelector('#confirm-dialog[open]');
    await page.click('#confirm-ok');
    await page.waitForSelector('#reset-result .ok');
    const offs = await ok('GET', '/v1/groups/ResetGroup/offsets?topic=ResetTopic');
    assert.deepEqual(offs, [{ topic: 'ResetTopic', queueId: 0, offset: 2 }]);
    assert.equal((await page.locator('#group-total-lag').innerText()).trim(), '1');
    assert.deepEqual(problems, []);
  } finally {
    await page.close();
  }
});

test('resend a dead-letter message from the message page', async () => {
  const { page, problems } = await openPage(browser.ctx, B);
  try {
    await ok('PUT', '/v1/topics/DlqTopic', { queues: 1 });
    await ok('PUT', '/v1/groups/DlqGroup', { retryMaxTimes: 0 });
    await ok('POST', '/v1/topics/DlqTopic/messages', { body: 'poison', keys: ['dlq-key'] });
    const [h] = await receiveAll('DlqGroup', 'DlqTopic', 1);
    await ok('POST', '/v1/groups/DlqGroup/nack', { topic: 'DlqTopic', receiptHandle: h });
    const dlq = await until(async () => {
      const res = await r('GET', '/v1/topics/%25DLQ%25DlqGroup/messages?begin=0&end=' + (Date.now() + 60000));
      return res.status === 200 && res.data.messages.length ? res.data.messages[0] : null;
    }, 5000, 'message in %DLQ%DlqGroup');

    await go(page, '#/groups/DlqGroup', 'group');
    const sys = await page.locator('section:has(#sys-h) tbody').innerText();
    assert.match(sys, /%DLQ%DlqGroup\s+1/);
    assert.match(sys, /%RETRY%DlqGroup\s+none yet/);

    await go(page, '#/messages/' + dlq.msgId, 'message');
    await page.screenshot({ path: path.join(OUT, 'message-dlq-1280.png'), fullPage: true });
    await page.click('#msg-resend');
    const link = page.locator('#resend-result .ok a.mono');
    await link.waitFor();
    const newId = (await link.innerText()).trim();
    const copy = await ok('GET', '/v1/messages/' + newId);
    assert.equal(copy.topic, 'DlqTopic');
    assert.equal(copy.body, 'poison');
    const back = await until(async () => {
      const res = await ok('GET', '/v1/topics/DlqTopic/messages?key=dlq-key');
      return res.messages.length === 2 ? res.messages : null;
    }, 5000, 'resent message on DlqTopic');
    assert.equal(back[1].msgId, newId);
    assert.deepEqual(problems, []);
  } finally {
    await page.close();
  }
});

test('API errors are shown to the user with the error message', async () => {
  const { page } = await openPage(browser.ctx, B);
  try {
    const bad = await r('PUT', '/v1/topics/' + encodeURIComponent('bad name!'), {});
    assert.equal(bad.status, 400);
    await go(page, '#/topics', 'topics');
    await page.click('#new-topic');
    await page.fill('#tf-name', 'bad name!');
    await page.click('#topic-form button[type=submit]');
    const err = page.locator('#form-dialog .form-error .error');
    await err.waitFor();
    assert.equal((await err.locator('.msg').innerText()).trim(), bad.data.error.message);
    assert.match(await err.innerText(), /INVALID_NAME/);
    assert.ok(await page.locator('#form-dialog[open]').count(), 'the dialog stays open');
    await page.screenshot({ path: path.join(OUT, 'dialog-error-1280.png') });
    await page.keyboard.press('Escape');
    await page.waitForSelector('#form-dialog', { state: 'hidden' });

    const missing = await r('GET', '/v1/topics/NoSuchTopic');
    assert.equal(missing.status, 404);
    await go(page, '#/topics/NoSuchTopic', 'topic');
    assert.equal((await page.locator('.error .msg').innerText()).trim(), missing.data.error.message);

    const noMsg = await r('GET', '/v1/messages/00000000000000000000000000000000');
    await go(page, '#/messages/00000000000000000000000000000000', 'message');
    assert.equal((await page.locator('.error .msg').first().innerText()).trim(), noMsg.data.error.message);

    await go(page, '#/messages?topic=Orders&begin=5&end=1', 'messages');
    assert.ok((await page.locator('#q-results .error .msg').innerText()).trim().length > 0);
  } finally {
    await page.close();
  }
});

test('keyboard: Tab reaches the navigation and a form submit; Escape closes dialogs', async () => {
  const { page, problems } = await openPage(browser.ctx, B);
  try {
    await go(page, '#/topics', 'topics');
    await page.focus('#skip-link');
    const seen = [];
    for (let i = 0; i < 7; i++) {
      await page.keyboard.press('Tab');
      seen.push(await page.evaluate(() => {
        const a = document.activeElement;
        return { text: a.textContent.trim(), nav: a.dataset.nav || '', outline: getComputedStyle(a).outlineStyle };
      }));
    }
    for (const n of ['dashboard', 'topics', 'groups', 'messages', 'transactions']) {
      const hit = seen.find(s => s.nav === n);
      assert.ok(hit, 'Tab reaches nav link ' + n + ': ' + JSON.stringify(seen));
      assert.notEqual(hit.outline, 'none', 'focus is visible on ' + n);
    }
    // Enter on a nav link follows it
    await page.evaluate(() => { delete document.body.dataset.rendered; });
    await page.focus('[data-nav=groups]');
    await page.keyboard.press('Enter');
    await page.waitForSelector('body[data-rendered="groups"]');

    // open the new-group dialog with the keyboard, tab to its submit button
    await page.focus('#new-group');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#form-dialog[open]');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'gf-name');
    let reached = false;
    for (let i = 0; i < 12 && !reached; i++) {
      await page.keyboard.press('Tab');
      reached = await page.evaluate(() => document.activeElement.matches('#group-form button[type=submit]'));
    }
    assert.ok(reached, 'Tab reaches the submit button');
    await page.keyboard.press('Escape');
    await page.waitForSelector('#form-dialog', { state: 'hidden' });
    assert.equal(await page.evaluate(() => document.activeElement.id), 'new-group', 'focus returns to the opener');

    // confirmation dialog: Escape cancels the delete
    await go(page, '#/topics', 'topics');
    await page.focus('#topics-table button[data-act=delete][data-name="Orders"]');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#confirm-dialog[open]');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'confirm-cancel');
    await page.keyboard.press('Escape');
    await page.waitForSelector('#confirm-dialog', { state: 'hidden' });
    assert.equal((await r('GET', '/v1/topics/Orders')).status, 200, 'Escape did not delete');
    assert.deepEqual(problems, []);
  } finally {
    await page.close();
  }
});

test('performance with 1,000 topics and 1,000 groups', async () => {
  const n = 1000;
  const ids = Array.from({ length: n }, (_, i) => String(i).padStart(4, '0'));
  const t0 = Date.now();
  await pool(ids, 32, id => ok('PUT', '/v1/topics/perf-topic-' + id, { queues: 4 }));
  await pool(ids, 32, id => ok('PUT', '/v1/groups/perf-group-' + id, {}));
  console.log('console-setup 1000 topics + 1000 groups in ' + (Date.now() - t0) + ' ms');

  const { page, problems } = await openPage(browser.ctx, B);
  try {
    let topicFetches = 0;
    page.on('request', q => { if (new URL(q.url()).pathname === '/v1/topics') topicFetches++; });
    const timings = {};
    for (const [name, hash] of [['topics', '#/topics'], ['groups', '#/groups'], ['dashboard', '#/']]) {
      await go(page, '#/transactions', 'transactions');
      await page.evaluate(h => {
        performance.clearMarks();
        performance.clearMeasures();
        delete document.body.dataset.rendered;
        performance.mark('petrel:nav');
        location.hash = h;
      }, hash);
      await page.waitForSelector('body[data-rendered="' + name + '"]');
      const ms = await page.evaluate(nm => {
        const marks = performance.getEntriesByName('petrel:rendered:' + nm, 'mark');
        if (!marks.length) return null;
        return performance.measure('petrel:route:' + nm, 'petrel:nav', 'petrel:rendered:' + nm).duration;
      }, name);
      assert.ok(typeof ms === 'number' && ms >= 0, 'render mark for ' + name);
      timings[name] = Math.round(ms * 10) / 10;
      console.log('console-timing ' + name + ' ' + timings[name].toFixed(1) + ' ms');
      if (name === 'topics') {
        assert.match(await page.locator('#topic-count').innerText(), /^1,0\d\d topics$/);
        assert.equal(await page.locator('#topics-table tbody tr').count(), 100);
        await page.click('#topics-table button[data-more=page]');
        assert.equal(await page.locator('#topics-table tbody tr').count(), 200);
        await page.click('#topics-table button[data-more=all]');
        assert.ok(await page.locator('#topics-table tbody tr').count() >= n);
        assert.ok(await page.locator('#topics-table .more').isHidden());
        const before = topicFetches;
        await page.fill('#topic-search', 'perf-topic-0999');
        assert.equal(await page.locator('#topics-table tbody tr').count(), 1);
        assert.equal(topicFetches, before, 'search does not fetch again');
      }
      if (name === 'groups') {
        assert.match(await page.locator('#group-count').innerText(), /^1,0\d\d groups$/);
        await page.fill('#group-search', 'perf-group-09');
        assert.equal(await page.locator('#groups-table tbody tr').count(), 100);
        assert.match(await page.locator('#group-count').innerText(), /^100 of 1,0\d\d groups$/);
      }
      if (name === 'dashboard') assert.match(await page.locator('#dash-stats').innerText(), /1,00\d/);
    }
    writeFileSync(path.join(OUT, 'timings.json'), JSON.stringify(timings, null, 2) + '\n');
    assert.deepEqual(problems, []);
  } finally {
    await page.close();
  }
});
