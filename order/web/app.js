// The live page: one EventSource on /v1/events?sku=..., a redraw per "state" event.
"use strict";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
let source = null;

function setText(id, v) { $(id).textContent = String(v); }

function badWhenNonZero(cardId, n) { $(cardId).classList.toggle("bad", n !== 0); }

function render(s) {
  const a = s.audit;
  setText("stock", a.stock);
  setText("orders", a.orders);
  setText("units-sold", a.units_sold);
  setText("oversold", a.oversold);
  setText("lost-updates", a.lost_updates);
  badWhenNonZero("oversold-card", a.oversold);
  badWhenNonZero("lost-card", a.lost_updates);
  setText("rate-purchases", s.rates.purchases_per_s.toFixed(1));
  setText("rate-wakeups", s.rates.wakeups_per_s.toFixed(1));
  setText("rate-refused", s.rates.refused_per_s.toFixed(1));
  setText("rate-sold-out", s.rates.sold_out_fast_per_s.toFixed(1));
  // Sold out as the audit read it; buyers are then answered by a read of the stock, not a turn.
  $("stock-card").classList.toggle("sold-out", a.stock === 0);
  setText("stock-note", a.stock === 0 ? "sold out" : "of " + a.initial_stock);
  setText("replica", s.replica);

  const modes = $("modes");
  // The fleet's members as ZooKeeper holds them (ephemeral nodes): each runs the fleet's mode,
  // read under its hold of the switch barrier; one that does not serve says why.
  modes.replaceChildren(...s.replicas.map((r) => {
    const li = document.createElement("li");
    li.dataset.replica = r.id;
    li.className = r.id === s.replica ? "self" : "";
    const mode = document.createElement("span");
    mode.className = "mode-" + (r.mode || "joining");
    mode.textContent = r.mode ? r.mode + " v" + r.version : "joining";
    li.append(r.id + ": ", mode);
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

function connect(sku) {
  if (source) source.close();
  const status = $("status");
  status.textContent = "connecting";
  status.className = "status";
  source = new EventSource("/v1/events?sku=" + encodeURIComponent(sku));
  source.addEventListener("state", (ev) => {
    status.textContent = "live";
    status.className = "status live";
    render(JSON.parse(ev.data));
  });
  source.onerror = () => {
    status.textContent = "reconnecting";
    status.className = "status down";
  };
}

async function start() {
  const res = await fetch("/v1/products");
  const body = await res.json();
  const skus = (body.products || []).map((p) => p.sku);
  const wanted = params.get("sku") || skus[0];
  const select = $("sku-select");
  for (const sku of new Set([...skus, wanted].filter(Boolean))) {
    const opt = document.createElement("option");
    opt.value = opt.textContent = sku;
    select.append(opt);
  }
  if (!wanted) {
    setText("status", "no products yet");
    return;
  }
  select.value = wanted;
  select.addEventListener("change", () => {
    history.replaceState(null, "", "?sku=" + encodeURIComponent(select.value));
    connect(select.value);
  });
  connect(wanted);
}

start().catch((err) => { setText("status", "error: " + err.message); });
