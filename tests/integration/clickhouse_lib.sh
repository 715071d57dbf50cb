# ClickHouse for the fleet tests (sourced after lib.sh): Debian's clickhouse-server run as a
# child process on free loopback ports, with its data, logs and generated config in $TMP.
# ch_start NAME [REMOTE_SERVERS_XML] → sets CH_<NAME>_HTTP, CH_<NAME>_TCP, CH_<NAME>_PID;
# ch_stop NAME; ch_query NAME SQL (prints the result, fails the test on an error).

CH_SERVER=${CH_SERVER:-/usr/sbin/clickhouse-server}

# free_port: a TCP port nobody listens on now (bound by the kernel, then released).
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

ch_config() { # NAME DIR HTTP TCP INTERSERVER REMOTE_SERVERS_XML
  cat >"$2/config.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>$2/log/server.log</log><errorlog>$2/log/err.log</errorlog>
    <size>10M</size><count>1</count></logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>$3</http_port>
  <tcp_port>$4</tcp_port>
  <interserver_http_port>$5</interserver_http_port>
  <path>$2/data/</path>
  <tmp_path>$2/tmp/</tmp_path>
  <user_files_path>$2/user_files/</user_files_path>
  <format_schema_path>$2/format_schemas/</format_schema_path>
  <users_config>$2/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
  <mark_cache_size>67108864</mark_cache_size>
  <uncompressed_cache_size>67108864</uncompressed_cache_size>
  <max_concurrent_queries>50</max_concurrent_queries>
  <remote_servers>${6:-}</remote_servers>
</yandex>
XML
  cat >"$2/users.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>2000000000</max_memory_usage></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
    <profile>default</profile><quota>default</quota></default></users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors>
    <result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time>
  </interval></default></quotas>
</yandex>
XML
}

# ch_start NAME [REMOTE_SERVERS_XML]: starts (or restarts, on the same ports and data) the
# server NAME and waits until it answers /ping.
ch_start() {
  local name=$1 dir="$TMP/ch-$1" http tcp inter
  http=$(eval echo "\${CH_${name}_HTTP:-}")
  if [ -z "$http" ]; then
    http=$(free_port); tcp=$(free_port); inter=$(free_port)
    eval "CH_${name}_HTTP=$http CH_${name}_TCP=$tcp CH_${name}_INTER=$inter"
  fi
  tcp=$(eval echo "\$CH_${name}_TCP"); inter=$(eval echo "\$CH_${name}_INTER")
  mkdir -p "$dir/log" "$dir/data" "$dir/tmp" "$dir/user_files" "$dir/format_schemas"
  [ -f "$dir/config.xml" ] || ch_config "$name" "$dir" "$http" "$tcp" "$inter" "${2:-}"
  (cd "$dir" && exec "$CH_SERVER" --config-file="$dir/config.xml" >"$dir/log/stdout" 2>&1) &
  eval "CH_${name}_PID=$!"
  for ((i = 0; i < 300; i++)); do
    curl -sf "http://127.0.0.1:$http/ping" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  fail "clickhouse-server $name did not start: $(tail -5 "$dir/log/err.log" "$dir/log/stdout" 2>/dev/null)"
}

ch_stop() {
  local pid
  pid=$(eval echo "\${CH_${1}_PID:-}")
  [ -n "$pid" ] || return 0
  kill "$pid" 2>/dev/null || true
  for ((i = 0; i < 200; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  eval "CH_${1}_PID="
}

ch_url() { echo "http://127.0.0.1:$(eval echo "\$CH_${1}_HTTP")/"; }

ch_query() {
  local out
  out=$(curl -sS --fail-with-body --data-binary "$2" "$(ch_url "$1")" 2>&1) ||
    fail "clickhouse $1: $2: $out"
  printf '%s\n' "$out"
}
