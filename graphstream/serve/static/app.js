// The service's page: plain JS over the JSON API (docs/service.md). The token stays in localStorage
// and goes out as "Authorization: Bearer"; plots are fetched with it and shown through blob URLs.
"use strict";

const EXAMPLES = {
  generate: {generator: "rmat", out: "g.zarr", scale: 12, edge_factor: 8},
  partition: {store: "g.zarr", k: 4, algo: "hash", out: "g-p4"},
  ingest: {source: "edges.tsv", out: "g.zarr"},
  dataset: {name: "cora", out_dir: "cora", root: "shared-datasets"},
  snapshots: {store: "g.zarr", out: "g-snapshots", num_snapshots: 8},
  export: {parts: "g-p4", out: "g-p4-dgl", to: "dgl"},
  verify: {path: "g-p4"},
  info: {store: "g.zarr"},
  pipeline: {steps: [
    {kind: "generate", args: {generator: "rmat", out: "g.zarr", scale: 12, edge_factor: 8}},
    {kind: "partition", args: {store: "g.zarr", k: 4, algo: "hash", out: "g-p4"}},
  ]},
};
const POLL_MS = 1000;
const $ = (id) => document.getElementById(id);
let selectedJob = null;
let logOffset = 0;
let logBusy = false;
let succeededSeen = -1;
const plotUrls = [];

function token() { return localStorage.getItem("graphstream-token") || ""; }

async function api(path, options = {}) {
  const headers = Object.assign({"Authorization": "Bearer " + token()}, options.headers || {});
  const response = await fetch(path, Object.assign({}, options, {headers}));
  if (!response.ok) {
    let detail = response.statusText;
    try { detail = (await response.json()).detail || detail; } catch (e) { /* not JSON */ }
    throw new Error(response.status + ": " + detail);
  }
  return response;
}

function text(value) { return value === null || value === undefined ? "" : String(value); }
function count(n) { return typeof n === "number" ? n.toLocaleString("en-US") : ""; }
function cell(row, value, cls) {
  const td = row.insertCell();
  td.textContent = text(value);
  if (cls) td.className = cls;
  return td;
}
function button(label, onclick) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  b.addEventListener("click", onclick);
  return b;
}

// -- submit ------------------------------------------------------------------------------------------

function showExample() { $("args").value = JSON.stringify(EXAMPLES[$("kind").value], null, 1); }

async function submit(event) {
  event.preventDefault();
  const out = $("submit-result");
  out.className = "";
  let args;
  try { args = JSON.parse($("args").value || "{}"); } catch (e) {
    out.className = "error";
    out.textContent = "args: not JSON (" + e.message + ")";
    return;
  }
  const body = {kind: $("kind").value, args};
  if ($("idempotency-key").value) body.idempotency_key = $("idempotency-key").value;
  try {
    const response = await api("/api/jobs", {method: "POST", headers: {"Content-Type": "application/json"},
                                             body: JSON.stringify(body)});
    const job = await response.json();
    out.textContent = (response.status === 201 ? "queued job " : "existing job ") + job.id;
    selectJob(job.id);
    refreshJobs();
  } catch (e) {
    out.className = "error";
    out.textContent = e.message;
  }
}

// -- jobs and log --------------------------------------------------------------------------------------

async function refreshJobs() {
  if (!token()) { $("jobs-note").textContent = "(enter a token)"; return; }
  try {
    const jobs = (await (await api("/api/jobs?limit=50")).json()).jobs;
    $("jobs-note").textContent = "";
    const body = $("jobs").tBodies[0];
    body.replaceChildren();
    for (const job of jobs) {
      const row = body.insertRow();
      row.dataset.jobId = job.id;
      if (job.id === selectedJob) row.className = "selected";
      cell(row, job.id);
      cell(row, job.kind);
      cell(row, job.state, "state state-" + job.state);
      cell(row, job.stage);
      const p = document.createElement("progress");
      p.max = 1;
      if (job.progress !== null) p.value = job.progress;
      row.insertCell().appendChild(p);
      cell(row, (job.created_at || "").replace("T", " ").slice(0, 19));
      cell(row, job.duration_seconds === null ? "" : job.duration_seconds.toFixed(1) + " s", "num");
      cell(row, job.owner);
      const actions = row.insertCell();
      actions.appendChild(button("log", () => selectJob(job.id)));
      if (job.state === "queued" || job.state === "running") {
        actions.appendChild(button("cancel", () => cancelJob(job.id)));
      }
      if (job.state === "succeeded" && job.kind === "partition" && job.args.out) {
        actions.appendChild(button("report", () => showReport(job.args.out)));   // the path under the root
      }
    }
    // a job that just succeeded may have written a dataset
    const succeeded = jobs.filter((j) => j.state === "succeeded").length;
    if (succeeded !== succeededSeen) { succeededSeen = succeeded; refreshDatasets(); }
  } catch (e) {
    $("jobs-note").textContent = e.message;
  }
}

function selectJob(id) {
  selectedJob = id;
  logOffset = 0;
  $("log").textContent = "";
  $("log").className = "";
  $("log-job").textContent = id;
  refreshLog();
}

async function refreshLog() {
  // one request at a time, and none applied to a job that is no longer the selected one
  if (!selectedJob || logBusy) return;
  logBusy = true;
  const id = selectedJob;
  try {
    const job = await (await api("/api/jobs/" + id)).json();
    const response = await api("/api/jobs/" + id + "/log?offset=" + logOffset);
    const chunk = await response.text();
    if (id !== selectedJob) return;
    $("job-detail").textContent = job.error ? job.error : "";
    if (chunk) {
      $("log").textContent += chunk;
      logOffset += new TextEncoder().encode(chunk).length;
      $("log").scrollTop = $("log").scrollHeight;
    }
  } catch (e) {
    $("job-detail").textContent = e.message;
  } finally {
    logBusy = false;
  }
}

async function cancelJob(id) {
  try { await api("/api/jobs/" + id + "/cancel", {method: "POST"}); } catch (e) { alert(e.message); }
  refreshJobs();
}

// -- datasets and report ------------------------------------------------------------------------------

async function refreshDatasets() {
  if (!token()) return;
  const body = $("datasets").tBodies[0];
  try {
    const datasets = (await (await api("/api/datasets")).json()).datasets;
    body.replaceChildren();
    for (const d of datasets) {
      const row = body.insertRow();
      cell(row, d.path);
      cell(row, d.kind);
      cell(row, count(d.num_nodes), "num");
      cell(row, count(d.num_edges), "num");
      cell(row, text(d.num_parts), "num");
      cell(row, typeof d.replication_factor === "number" ? d.replication_factor.toFixed(3) : "", "num");
      const actions = row.insertCell();
      if (d.error) actions.textContent = d.error;
      else if (d.kind === "partitions") actions.appendChild(button("report", () => showReport(d.path)));
    }
  } catch (e) {
    body.replaceChildren();
    cell(body.insertRow(), e.message, "error");
  }
}

async function showReport(path) {
  $("report-path").textContent = path;
  const figures = $("report-figures");
  const plots = $("plots");
  figures.replaceChildren();
  plots.replaceChildren();
  plotUrls.splice(0).forEach((url) => URL.revokeObjectURL(url));
  try {
    const report = await (await api("/api/datasets/" + encodePath(path) + "/report")).json();
    const rows = [["algorithm", report.algorithm], ["parts (k)", report.num_parts],
                  ["nodes", count(report.num_nodes)], ["edges", count(report.num_edges)],
                  ["replication factor", report.replication_factor.toFixed(4)],
                  ["node balance", report.node_balance.toFixed(4)], ["edge balance", report.edge_balance.toFixed(4)],
                  ["halo fraction", report.halo_fraction.toFixed(4)]];
    for (const [name, value] of rows) {
      const row = figures.insertRow();
      const th = document.createElement("th");
      th.textContent = name;
      row.appendChild(th);
      cell(row, value);
    }
    for (const [name, urls] of Object.entries(report.plots)) {
      const blob = await (await api(urls.png)).blob();
      const url = URL.createObjectURL(blob);
      plotUrls.push(url);
      const img = document.createElement("img");
      img.className = "plot";
      img.id = "plot-" + name;
      img.alt = name;
      img.src = url;
      plots.appendChild(img);
    }
  } catch (e) {
    cell(figures.insertRow(), e.message, "error");
  }
}

function encodePath(path) { return path.split("/").map(encodeURIComponent).join("/"); }

// -- start -----------------------------------------------------------------------------------------

$("token").value = token();
$("save-token").addEventListener("click", () => {
  localStorage.setItem("graphstream-token", $("token").value.trim());
  refreshJobs();
  refreshDatasets();
});
$("kind").addEventListener("change", showExample);
$("submit-form").addEventListener("submit", submit);
$("refresh-datasets").addEventListener("click", refreshDatasets);
showExample();
refreshJobs();
refreshDatasets();
setInterval(() => { refreshJobs(); refreshLog(); }, POLL_MS);
