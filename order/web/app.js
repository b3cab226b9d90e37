// The live page: it draws the state GET / embedded (#boot) at once, then one EventSource on
// /v1/events?sku=... redraws it per "state" event.
"use strict";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
// {products, sku, state}: the products for the picker, the product shown and its state when the
// page was served; null when the database did not answer then.
const boot = JSON.parse($("boot").textContent);

function setText(id, v) { $(id).textContent = String(v); }

function badWhenNonZero(cardId, n) { $(cardId).classList.toggle("bad", n !== 0); }

// The rates (null until this replica has measured them over half a second).
function renderRates(r) {
  const ids = ["rate-fleet-purchases", "rate-purchases", "rate-wakeups", "rate-refused", "rate-sold-out"];
  if (!r) {
    for (const id of ids) {
      setText(id, "measuring");
      $(id).classList.add("pending");
      $(id).title = "a rate needs half a second of this replica's updates";
    }
    setText("rates-window", "being measured: half a second first");
    setText("rate-share", "this product's orders it made");
    return;
  }
  const values = [r.fleet_purchases_per_s, r.purchases_per_s, r.wakeups_per_s, r.refused_per_s, r.sold_out_fast_per_s];
  ids.forEach((id, i) => {
    setText(id, values[i].toFixed(1));
    $(id).classList.remove("pending");
    $(id).title = "";
  });
  setText("rates-window", "over the last " + r.window_s.toFixed(1) + " s");
  setText("rate-share", r.fleet_purchases_per_s > 0
    ? "this product's orders it made: " + Math.round(100 * r.purchases_per_s / r.fleet_purchases_per_s) + "% of all"
    : "this product's orders it made");
}

function render(s) {
  const a = s.audit;
  setText("stock", a.stock);
  setText("orders", a.orders);
  setText("units-sold", a.units_sold);
  setText("oversold", a.oversold);
  setText("lost-updates", a.lost_updates);
  badWhenNonZero("oversold-card", a.oversold);
  badWhenNonZero("lost-card", a.lost_updates);
  renderRates(s.rates);
  // Sold out as the audit read it; buyers are then answered by a read of the stock, not a turn.
  $("stock-card").classList.toggle("sold-out", a.stock === 0);
  setText("stock-note", a.stock === 0 ? "sold out" : "of " + a.initial_stock);
  setText("replica", s.replica);
  for (const el of document.querySelectorAll(".self-name")) el.textContent = s.replica;

  const modes = $("modes");
  // The fleet's members as ZooKeeper holds them (ephemeral nodes): each runs the fleet's mode,
  // read under its hold of the switch barrier; one that does not serve says why.
  modes.replaceChildren(...s.replicas.map((r) => {
    const li = document.createElement("li");
    li.dataset.replica = r.id;
    li.className = r.id === s.replica ? "self" : "";
    const mode = document.createElement("span");
    mode.className = "mode-" + (r.mode || "joining");
    mode.textContent = r.mode || "joining";
    li.append(r.id + ": ", mode);
    if (r.mode) {
      // The mode node's version: how many times the fleet's mode was switched, the same number on
      // every replica that has taken the latest switch.
      const version = document.createElement("span");
      version.className = "version";
      version.textContent = r.version === 0 ? " (as started)" : " (switch #" + r.version + ")";
      version.title = r.version === 0
        ? "the fleet's mode as first set: never switched since"
        : "the fleet's lock mode has been switched " + r.version + " times (PUT /admin/lock-mode); a replica with a lower number has not taken the latest switch yet";
      li.append(version);
    }
    if (!r.serving) li.append(" (not serving" + (r.why ? ": " + r.why : "") + ")");
    return li;
  }));

  // The fair lock's waiters each watch their predecessor; the herd recipe's all watch the path.
  const herd = s.mode === "zk-herd";
  setText("wakeups-note", herd ? "every waiter wakes on every release: the herd" : "one per release at most: no herd");
  setText("queue-hint", herd
    ? "Mode zk-herd: every waiter watches the lock path itself, so each release wakes them all, and all of them read the queue again."
    : "Each node is one buyer's EPHEMERAL_SEQUENTIAL node, in sequence order. The lowest holds the lock; each waiter watches only the node just before its own (the arrow).");
  setText("queue-path", "/zkstock/locks/sku/" + s.sku);
  setText("queue-count", s.queue_total);
  const queue = $("queue");
  queue.replaceChildren(...s.queue.map((e, i) => {
    const li = document.createElement("li");
    if (i > 0 && !herd) {
      const arrow = document.createElement("span");
      arrow.className = "arrow";
      arrow.title = "seq " + e.seq + " watches seq " + s.queue[i - 1].seq;
      arrow.textContent = "⟵";
      li.append(arrow);
    }
    const node = document.createElement("div");
    node.className = "node" + (e.holder ? " holder" : "");
    node.dataset.holder = String(e.holder);
    node.title = e.node;
    const seq = document.createElement("div");
    seq.className = "seq";
    seq.textContent = "#" + e.seq + (e.holder ? " holds" : " waits");
    const meta = document.createElement("div");
    meta.className = "meta";
    meta.textContent = e.owner + " · " + e.kind + " · token " + e.token + (herd && !e.holder ? " · watches the path" : "");
    node.append(seq, meta);
    li.append(node);
    return li;
  }));
  const more = $("queue-more");
  more.hidden = s.queue_total <= s.queue.length;
  more.textContent = "… and " + (s.queue_total - s.queue.length) + " more";

  const errors = $("errors");
  errors.hidden = !s.errors || s.errors.length === 0;
  errors.textContent = (s.errors || []).join("; ");
}

function setStatus(text, className, title) {
  const status = $("status");
  status.textContent = text;
  status.className = "status " + className;
  status.title = title || "";
}

function connect(sku) {
  const source = new EventSource("/v1/events?sku=" + encodeURIComponent(sku));
  source.addEventListener("state", (ev) => {
    setStatus("live", "live", "updated as the stock and the lock queue change, and every second");
    render(JSON.parse(ev.data));
  });
  source.onerror = () => setStatus("reconnecting", "down", "the stream from the replica broke; the browser opens it again");
}

async function productList() {
  if (boot) return boot.products;
  const res = await fetch("/v1/products");
  const body = await res.json();
  return (body.products || []).map((p) => p.sku);
}

async function start() {
  const skus = await productList();
  const wanted = params.get("sku") || skus[0];
  const select = $("sku-select");
  for (const sku of new Set([...skus, wanted].filter(Boolean))) {
    const opt = document.createElement("option");
    opt.value = opt.textContent = sku;
    select.append(opt);
  }
  if (!wanted) {
    setStatus("no products yet", "");
    return;
  }
  select.value = wanted;
  // Another product is another page: served with its own state, drawn at once.
  select.addEventListener("change", () => location.assign("?sku=" + encodeURIComponent(select.value)));
  if (boot && boot.state && boot.sku === wanted) {
    render(boot.state);
    const at = new Date(boot.state.at);
    setStatus("as of " + at.toLocaleTimeString(), "", "the state when the page was served; the live updates follow");
  }
  connect(wanted);
}

start().catch((err) => setStatus("error: " + err.message, "down"));
