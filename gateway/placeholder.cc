namespace geogate::gateway {}
