# Sourced by the engine checks and benchmarks: registers this checkout's symmar plugin for one engine
# without installing the wheel, as a dist-info of its own under $work/ep with the entry point
# `symmar` in group $plugin_group pointing at $plugin_target, and puts it and the checkout's python/
# on PYTHONPATH. Needs $work (a scratch folder) and $root (the checkout) set.
#   plugin_group=vllm.general_plugins plugin_target=symmar.integrations.vllm:register
#   . "$root/tests/engines/register_plugin.sh"
mkdir -p "$work/ep/symmar-0.0.0.dist-info"
printf 'Metadata-Version: 2.1\nName: symmar\nVersion: 0.0.0\n' >"$work/ep/symmar-0.0.0.dist-info/METADATA"
printf '[%s]\nsymmar = %s\n' "$plugin_group" "$plugin_target" >"$work/ep/symmar-0.0.0.dist-info/entry_points.txt"
export PYTHONPATH="$work/ep:$root/python"
