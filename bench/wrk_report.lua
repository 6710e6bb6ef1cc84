-- wrk script for bench/load.sh: cycles through the paths given after `--` (default: the URL's
-- own path), counts every response that is not 200 (wrk itself counts only 4xx/5xx, and a
-- redirect to the login page would pass), and ends with machine-readable figures. With
-- `max=N flag=FILE`, a thread that has had N responses creates FILE and stops: the caller
-- watches for it and interrupts wrk (SIGINT), which then reports on the time really taken.
--   wrk -c 24 -d 180s -s bench/wrk_report.lua http://127.0.0.1:8765/ -- max=20000 flag=/tmp/f /compare/?...
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  paths = {}
  limit = 0
  for _, arg in ipairs(args) do
    if string.sub(arg, 1, 4) == "max=" then
      limit = tonumber(string.sub(arg, 5))
    elseif string.sub(arg, 1, 5) == "flag=" then
      flag = string.sub(arg, 6)
    else
      paths[#paths + 1] = arg
    end
  end
  if #paths == 0 then
    paths[1] = wrk.path
  end
  sent = 0
  not_ok = 0
  first_status = 0
end

function request()
  sent = sent + 1
  return wrk.format(nil, paths[(sent % #paths) + 1])
end

function response(status, headers, body)
  received = (received or 0) + 1
  if limit > 0 and received == limit then
    if flag then
      local file = io.open(flag, "w")
      if file then
        file:close()
      end
    end
    wrk.thread:stop()
  end
  if status ~= 200 then
    not_ok = not_ok + 1
    if first_status == 0 then
      first_status = status
    end
  end
end

function done(summary, latency, requests)
  local bad, status = 0, 0
  for _, thread in ipairs(threads) do
    bad = bad + thread:get("not_ok")
    if status == 0 then
      status = thread:get("first_status")
    end
  end
  local e = summary.errors
  io.write(string.format("REPORT requests=%d duration_us=%d p50_us=%d p99_us=%d max_us=%d mean_us=%.0f " ..
                         "not_200=%d first_bad_status=%d socket_errors=%d\n",
                         summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
                         latency.max, latency.mean, bad, status,
                         e.connect + e.read + e.write + e.timeout))
end
